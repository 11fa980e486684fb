// Control groups of builds: v2 and v1 over a CgroupSystem
// (kiln/worker/cgroups.h).
#include "kiln/worker/cgroups.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "cgroup_text.h"
#include "kiln/common/error.h"
#include "kiln/common/logging.h"

namespace kiln::worker {
namespace {

/// How many times a group is killed and its removal tried (CgroupSystem::
/// pause between) before it is left behind with a warning: 2 s for real.
constexpr int kRemoveTries = 400;

/// Kills and removes `dirs`; never throws (a destructor's work).
void destroyGroups(CgroupSystem& sys, const std::vector<std::string>& dirs,
                   const std::function<void()>& killAll) {
  for (int i = 0; i < kRemoveTries; ++i) {
    killAll();
    bool all = true;
    try {
      for (auto& d : dirs) all = sys.removeDir(d) && all;
    } catch (const std::exception& e) {
      logWarn(std::string("cannot remove a build's control group: ") +
              e.what());
      return;
    }
    if (all) return;
    sys.pause();
  }
  logWarn("a build's control group still has processes; left behind: " +
          dirs.front());
}

/// Kills every pid listed in `procsFile`.
void killListed(CgroupSystem& sys, const std::string& procsFile) {
  auto text = sys.read(procsFile);
  if (!text) return;
  std::istringstream in(*text);
  long pid;
  while (in >> pid)
    if (pid > 0) sys.kill(static_cast<pid_t>(pid));
}

/// The pid in a group name "kiln-build-<pid>-<n>", or 0.
pid_t ownerOf(const std::string& name) {
  static const std::string kPrefix = "kiln-build-";
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return 0;
  long pid = std::strtol(name.c_str() + kPrefix.size(), nullptr, 10);
  return pid > 0 ? static_cast<pid_t>(pid) : 0;
}

/// The names of the groups in `base` whose worker is gone.
std::vector<std::string> staleGroups(CgroupSystem& sys,
                                     const std::string& base) {
  std::vector<std::string> out;
  for (auto& name : sys.subdirs(base)) {
    pid_t owner = ownerOf(name);
    if (owner && owner != ::getpid() && !sys.exists(owner)) out.push_back(name);
  }
  return out;
}

/// A v2 group: one directory with every controller.
class V2Build : public BuildCgroup {
 public:
  V2Build(std::shared_ptr<CgroupSystem> sys, std::string dir)
      : sys_(std::move(sys)), dir_(std::move(dir)) {}
  ~V2Build() override {
    destroyGroups(*sys_, {dir_}, [this] { killAll(); });
  }
  std::vector<std::string> procsFiles() const override {
    return {dir_ + "/cgroup.procs"};
  }
  CgroupUsage usage() override {
    CgroupUsage u;
    u.memoryPeakBytes = readNumber(*sys_, dir_ + "/memory.peak");
    u.cpuTimeUs = keyedValue(sys_->read(dir_ + "/cpu.stat"), "usage_usec");
    u.oomKills = keyedValue(sys_->read(dir_ + "/memory.events"), "oom_kill");
    u.pidsMaxHits = keyedValue(sys_->read(dir_ + "/pids.events"), "max");
    return u;
  }
  void killAll() override {
    try {
      sys_->write(dir_ + "/cgroup.kill", "1");  // Linux 5.14
      return;
    } catch (const SysError&) {
    }
    killListed(*sys_, dir_ + "/cgroup.procs");
  }

 private:
  std::shared_ptr<CgroupSystem> sys_;
  std::string dir_;
};

class V2Cgroups : public Cgroups {
 public:
  V2Cgroups(std::shared_ptr<CgroupSystem> sys, std::string root,
            bool isRootGroup, bool wantCpu)
      : sys_(std::move(sys)), root_(std::move(root)), wantCpu_(wantCpu) {
    enableControllers(isRootGroup);
  }
  std::string describe() const override { return "cgroup v2 at " + root_; }
  size_t sweep() override {
    auto stale = staleGroups(*sys_, root_);
    for (auto& name : stale) V2Build(sys_, root_ + "/" + name);  // destroyed
    return stale.size();
  }
  std::unique_ptr<BuildCgroup> create(const std::string& name,
                                      const CgroupLimits& lim) override {
    std::string dir = root_ + "/" + name;
    sys_->makeDir(dir);
    auto build = std::make_unique<V2Build>(sys_, dir);  // removes on a throw
    if (lim.memoryMax) {
      sys_->write(dir + "/memory.max", std::to_string(lim.memoryMax));
      // At the limit the build is killed, whole, rather than swapped out.
      if (sys_->read(dir + "/memory.swap.max"))
        sys_->write(dir + "/memory.swap.max", "0");
      if (sys_->read(dir + "/memory.oom.group"))
        sys_->write(dir + "/memory.oom.group", "1");
    }
    if (lim.pidsMax)
      sys_->write(dir + "/pids.max", std::to_string(lim.pidsMax));
    if (lim.cpuWeight && wantCpu_)
      sys_->write(dir + "/cpu.weight", std::to_string(lim.cpuWeight));
    return build;
  }

 private:
  /// The builds' controllers in the worker group's subtree_control. A
  /// group with processes cannot pass controllers down (the kernel's "no
  /// internal processes" rule, except at the root): the worker's own
  /// processes move to a leaf, `kiln-worker`, first.
  void enableControllers(bool isRootGroup) {
    std::string want = wantCpu_ ? "memory pids cpu" : "memory pids";
    auto enabled = sys_->read(root_ + "/cgroup.subtree_control");
    if (enabled && hasWords(*enabled, want)) return;
    if (!isRootGroup) {
      auto procs = sys_->read(root_ + "/cgroup.procs").value_or("");
      std::istringstream in(procs);
      std::string pid;
      bool made = false;
      while (in >> pid) {
        if (!made) sys_->makeDir(root_ + "/kiln-worker");
        made = true;
        sys_->write(root_ + "/kiln-worker/cgroup.procs", pid);
      }
    }
    std::string line;
    std::istringstream words(want);
    for (std::string w; words >> w;) line += (line.empty() ? "+" : " +") + w;
    sys_->write(root_ + "/cgroup.subtree_control", line);
  }

  std::shared_ptr<CgroupSystem> sys_;
  std::string root_;
  bool wantCpu_;
};

/// A v1 group: one directory per hierarchy it joins.
class V1Build : public BuildCgroup {
 public:
  V1Build(std::shared_ptr<CgroupSystem> sys, V1Dirs dirs)
      : sys_(std::move(sys)), dirs_(std::move(dirs)) {}
  ~V1Build() override {
    destroyGroups(*sys_, dirs_.all, [this] { killAll(); });
  }
  std::vector<std::string> procsFiles() const override {
    std::vector<std::string> files;
    for (auto& d : dirs_.all) files.push_back(d + "/cgroup.procs");
    return files;
  }
  CgroupUsage usage() override {
    CgroupUsage u;
    u.memoryPeakBytes =
        readNumber(*sys_, dirs_.memory + "/memory.max_usage_in_bytes");
    u.oomKills = keyedValue(sys_->read(dirs_.memory + "/memory.oom_control"),
                            "oom_kill");
    u.pidsMaxHits = keyedValue(sys_->read(dirs_.pids + "/pids.events"), "max");
    if (!dirs_.cpuacct.empty())
      u.cpuTimeUs = readNumber(*sys_, dirs_.cpuacct + "/cpuacct.usage") / 1000;
    return u;
  }
  void killAll() override {
    // v1 has no cgroup.kill; the pids group holds every process (and its
    // limit bounds a fork bomb racing this loop).
    killListed(*sys_, dirs_.pids + "/cgroup.procs");
  }

 private:
  std::shared_ptr<CgroupSystem> sys_;
  V1Dirs dirs_;
};

class V1Cgroups : public Cgroups {
 public:
  V1Cgroups(std::shared_ptr<CgroupSystem> sys, V1Bases bases, bool wantCpu)
      : sys_(std::move(sys)), bases_(std::move(bases)), wantCpu_(wantCpu) {}
  std::string describe() const override {
    return "cgroup v1 at " + bases_.memory + " and " + bases_.pids;
  }
  size_t sweep() override {
    // The pids hierarchy holds every group (its limit, the kills).
    auto stale = staleGroups(*sys_, bases_.pids);
    for (auto& name : stale) V1Build(sys_, bases_.dirsFor(name, true));
    return stale.size();
  }
  std::unique_ptr<BuildCgroup> create(const std::string& name,
                                      const CgroupLimits& lim) override {
    V1Dirs d = bases_.dirsFor(name, wantCpu_);
    auto build = std::make_unique<V1Build>(sys_, d);  // removes on a throw
    for (auto& dir : d.all) sys_->makeDir(dir);
    if (lim.memoryMax) {
      auto bytes = std::to_string(lim.memoryMax);
      sys_->write(d.memory + "/memory.limit_in_bytes", bytes);
      // With swap accounting, memory + swap too: killed, not swapped out.
      if (sys_->read(d.memory + "/memory.memsw.limit_in_bytes"))
        sys_->write(d.memory + "/memory.memsw.limit_in_bytes", bytes);
    }
    if (lim.pidsMax)
      sys_->write(d.pids + "/pids.max", std::to_string(lim.pidsMax));
    if (lim.cpuWeight && !d.cpu.empty())
      sys_->write(d.cpu + "/cpu.shares",
                  std::to_string(std::max<uint64_t>(
                      2, uint64_t{lim.cpuWeight} * 1024 / 100)));
    return build;
  }

 private:
  std::shared_ptr<CgroupSystem> sys_;
  V1Bases bases_;
  bool wantCpu_;
};

}  // namespace

std::shared_ptr<Cgroups> detectCgroups(std::shared_ptr<CgroupSystem> sys,
                                       const std::string& mountinfo,
                                       const std::string& selfCgroup,
                                       bool wantCpu, std::string& why) {
  auto mounts = parseCgroupMounts(mountinfo);
  auto own = parseSelfCgroup(selfCgroup);
  if (auto v2 = v2Root(mounts, own)) {
    auto controllers = sys->read(v2->first + "/cgroup.controllers");
    std::string want = wantCpu ? "memory pids cpu" : "memory pids";
    if (controllers && hasWords(*controllers, want))
      return std::make_shared<V2Cgroups>(std::move(sys), v2->first, v2->second,
                                         wantCpu);
  }
  std::string missing;
  if (auto bases = v1Bases(mounts, own, missing))
    return std::make_shared<V1Cgroups>(std::move(sys), *bases, wantCpu);
  why =
      "no cgroup v2 mount with the memory and pids controllers, and " + missing;
  return nullptr;
}

std::shared_ptr<Cgroups> hostCgroups(bool wantCpu, std::string& why) {
  auto sys = realCgroupSystem();
  auto mountinfo = sys->read("/proc/self/mountinfo");
  auto self = sys->read("/proc/self/cgroup");
  if (!mountinfo || !self) {
    why = "cannot read /proc/self/mountinfo or /proc/self/cgroup";
    return nullptr;
  }
  try {
    auto groups = detectCgroups(sys, *mountinfo, *self, wantCpu, why);
    if (!groups) return nullptr;
    if (size_t n = groups->sweep())
      logInfo("removed " + std::to_string(n) +
              " control groups of builds of workers that are gone");
    groups->create(nextCgroupName(), {});  // may we? (removed at once)
    return groups;
  } catch (const Error& e) {
    why = e.what();
    return nullptr;
  }
}

std::string nextCgroupName() {
  static std::atomic<uint64_t> counter{0};
  return "kiln-build-" + std::to_string(::getpid()) + "-" +
         std::to_string(++counter);
}

}  // namespace kiln::worker
