#pragma once
/// Watches one running build against its resource limits
/// (docs/worker.md, "Limits per build"): its control group (memory,
/// processes) and the size of its build directory, and measures its peaks.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kiln/common/clock.h"
#include "kiln/common/status.h"
#include "kiln/store/derivation.h"
#include "kiln/worker/cgroups.h"

namespace kiln::worker {

/// What one build used, as measured (0: not measured).
struct BuildUsage {
  uint64_t peakMemoryBytes = 0;  ///< its control group's peak
  uint64_t cpuTimeUs = 0;        ///< CPU time of all its processes
  uint64_t buildDirBytes = 0;    ///< largest build directory seen
  bool operator==(const BuildUsage&) const = default;
};

/// The resource limits of one build; 0 means "no limit".
struct ResourceLimits {
  uint64_t memoryMaxBytes = 0;  ///< → StepStatus::kOutOfMemory
  uint64_t pidsMax = 0;         ///< → StepStatus::kProcessLimitExceeded
  uint32_t cpuWeight = 0;       ///< 1..10000, relative to 100
  uint64_t diskMaxBytes = 0;    ///< build dir → kDiskLimitExceeded
  bool operator==(const ResourceLimits&) const = default;
};

/// The system feature a worker announces when it has larger limits for
/// builds that require it (nixpkgs marks its largest builds with it).
inline constexpr const char* kBigBuildFeature = "big-parallel";

/// The limits of a build of `drv`: `big` (its unset fields from `normal`)
/// when `drv` requires kBigBuildFeature and `big` is set, else `normal`.
ResourceLimits limitsFor(const ResourceLimits& normal,
                         const std::optional<ResourceLimits>& big,
                         const store::Derivation& drv);

/// Measures the disk space a directory tree takes.
class DirectorySize {
 public:
  virtual ~DirectorySize() = default;
  /// Bytes allocated below `dir` (st_blocks, hard links once, no symlink
  /// followed, no other file system entered); 0 if it is gone. Stops
  /// counting once past `stopAbove` (0: never).
  virtual uint64_t measure(const std::string& dir, uint64_t stopAbove) = 0;
};

/// The real walk (openat/fstatat).
std::shared_ptr<DirectorySize> realDirectorySize();

/// A breach: the status and the message for the log and the build page.
struct LimitBreach {
  StepStatus status;
  std::string message;
};

/// One build's limits, checked from the runner's supervision loop.
class LimitWatch {
 public:
  /// The build directory is measured every `diskEvery` at most (and
  /// again at the end). `group` and `sizer` may be null; borrowed.
  LimitWatch(const ResourceLimits& limits, BuildCgroup* group,
             DirectorySize* sizer, std::string buildDir, const Clock& clock,
             Clock::Duration diskEvery = std::chrono::seconds(1));
  /// A breach since the build started, or nullopt. Cheap when nothing is
  /// due: reads the group's event counters, measures the directory when
  /// due.
  std::optional<LimitBreach> check();
  /// After the builder ended: a last check (a builder the kernel killed
  /// at its memory limit exits before any poll saw it) and the usage.
  std::optional<LimitBreach> finalCheck(BuildUsage& usage);
  /// Kills every process of the build's group (if it has one).
  void killGroup() {
    if (group_) group_->killAll();
  }

 private:
  std::optional<LimitBreach> checkGroup();
  std::optional<LimitBreach> checkDisk();

  ResourceLimits limits_;
  BuildCgroup* group_;
  DirectorySize* sizer_;
  std::string buildDir_;
  const Clock& clock_;
  Clock::Duration diskEvery_;
  Clock::TimePoint nextDisk_;
  uint64_t peakDir_ = 0;
};

}  // namespace kiln::worker
