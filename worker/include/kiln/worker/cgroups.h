#pragma once
/// One control group per build (docs/worker.md, "Limits per build"): the
/// worker puts every process of a build in a group of its own, with the
/// build's memory, process and CPU limits, reads what the group used, and
/// kills and removes it as a whole afterwards. Cgroup v2 (a subtree under
/// the worker's own group, as systemd's `Delegate=yes` hands it over) or
/// the v1 `memory`, `pids`, `cpu` and `cpuacct` hierarchies, whichever the
/// host has, detected at run time. File-system access goes through
/// CgroupSystem so that the logic of both versions is tested on a fake.

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::worker {

/// Limits of one build's control group; 0 means "no limit".
struct CgroupLimits {
  uint64_t memoryMax = 0;  ///< bytes (v2 memory.max, v1 limit_in_bytes)
  uint64_t pidsMax = 0;    ///< processes and threads (pids.max)
  uint32_t cpuWeight = 0;  ///< 1..10000 as v2's cpu.weight (default 100)
  bool operator==(const CgroupLimits&) const = default;
};

/// What a build's control group measured.
struct CgroupUsage {
  uint64_t memoryPeakBytes = 0;  ///< 0: the kernel does not say
  uint64_t cpuTimeUs = 0;        ///< user + system, every process
  uint64_t oomKills = 0;         ///< processes killed at memory.max
  uint64_t pidsMaxHits = 0;      ///< forks refused at pids.max
};

/// The side effects on control-group file systems.
class CgroupSystem {
 public:
  virtual ~CgroupSystem() = default;
  /// The file's contents, or nullopt when it cannot be read (missing).
  virtual std::optional<std::string> read(const std::string& path) = 0;
  /// Writes `value` to the file in one write. Throws SysError.
  virtual void write(const std::string& path, const std::string& value) = 0;
  /// mkdir; an existing directory is fine. Throws SysError.
  virtual void makeDir(const std::string& path) = 0;
  /// rmdir; false while the group still has processes (EBUSY). A missing
  /// directory counts as removed. Throws SysError for other errors.
  virtual bool removeDir(const std::string& path) = 0;
  /// Sends SIGKILL to `pid` (gone already is fine).
  virtual void kill(pid_t pid) = 0;
  /// The names of the directories in `dir` (empty when it cannot be read).
  virtual std::vector<std::string> subdirs(const std::string& dir) = 0;
  /// Whether process `pid` exists.
  virtual bool exists(pid_t pid) = 0;
  /// Waits a little (while a killed group empties).
  virtual void pause() = 0;
};

/// The real file systems (/sys/fs/cgroup), kill(2) and a 5 ms sleep.
std::shared_ptr<CgroupSystem> realCgroupSystem();

/// One build's control group: created with its limits before the builder
/// starts; the destructor kills whatever is left in it and removes it.
class BuildCgroup {
 public:
  virtual ~BuildCgroup() = default;
  /// The `cgroup.procs` files (one per hierarchy) a process is written to
  /// so that it and everything it starts belong to the group.
  virtual std::vector<std::string> procsFiles() const = 0;
  /// What the group used so far, and the limits it hit.
  virtual CgroupUsage usage() = 0;
  /// Sends SIGKILL to every process in the group (does not wait).
  virtual void killAll() = 0;
};

/// The host's control groups.
class Cgroups {
 public:
  virtual ~Cgroups() = default;
  /// "cgroup v2 at /sys/fs/cgroup/system.slice/kiln-worker.service", ...
  virtual std::string describe() const = 0;
  /// A new group named `name` (unique among the worker's running builds)
  /// with `limits`. Throws Error when it cannot be made.
  virtual std::unique_ptr<BuildCgroup> create(const std::string& name,
                                              const CgroupLimits& limits) = 0;
  /// Kills and removes the groups a worker that is gone left behind
  /// ("kiln-build-<pid>-<n>" of a pid that no longer exists); returns how
  /// many.
  virtual size_t sweep() = 0;
};

/// Which control groups the host has, from the text of
/// /proc/self/mountinfo and /proc/self/cgroup. v2 when its mount offers
/// the `memory` and `pids` controllers, else v1 when `memory` and `pids`
/// hierarchies are mounted. Null, with the reason in `why`, when neither
/// is usable. `wantCpu`: builds get a CPU weight (the `cpu` controller).
std::shared_ptr<Cgroups> detectCgroups(std::shared_ptr<CgroupSystem> sys,
                                       const std::string& mountinfo,
                                       const std::string& selfCgroup,
                                       bool wantCpu, std::string& why);

/// detectCgroups over this process's /proc files and the real system;
/// sweeps what a crashed worker left (Cgroups::sweep) and makes a probe
/// group.
std::shared_ptr<Cgroups> hostCgroups(bool wantCpu, std::string& why);

/// A unique name for a build's group: "kiln-build-<pid>-<n>".
std::string nextCgroupName();

}  // namespace kiln::worker
