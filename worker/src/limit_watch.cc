#include "kiln/worker/limit_watch.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>
#include <sstream>
#include <utility>

#include "kiln/common/byte_size.h"
#include "kiln/common/file.h"

namespace kiln::worker {
namespace {

class RealDirectorySize : public DirectorySize {
 public:
  uint64_t measure(const std::string& dir, uint64_t stopAbove) override {
    AutoCloseFD fd(
        ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) return 0;
    struct stat st;
    if (::fstat(fd.get(), &st) < 0) return 0;
    Walk w{st.st_dev, stopAbove, 0, {}};
    w.total = static_cast<uint64_t>(st.st_blocks) * 512;
    walk(w, fd.release());
    return w.total;
  }

 private:
  struct Walk {
    dev_t dev;
    uint64_t stopAbove, total;
    std::set<std::pair<dev_t, ino_t>> linked;  // nlink > 1, counted once
  };
  /// Adds what is below the directory `fd` (taken over) to w.total.
  static void walk(Walk& w, int fd) {
    DIR* d = ::fdopendir(fd);
    if (!d) {
      ::close(fd);
      return;
    }
    while (dirent* e = ::readdir(d)) {
      if (w.stopAbove && w.total > w.stopAbove) break;
      std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      struct stat st;
      if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
          st.st_dev != w.dev)
        continue;
      if (st.st_nlink > 1 && !S_ISDIR(st.st_mode) &&
          !w.linked.insert({st.st_dev, st.st_ino}).second)
        continue;
      w.total += static_cast<uint64_t>(st.st_blocks) * 512;
      if (!S_ISDIR(st.st_mode)) continue;
      int sub = ::openat(::dirfd(d), e->d_name,
                         O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
      if (sub >= 0) walk(w, sub);
    }
    ::closedir(d);
  }
};

}  // namespace

ResourceLimits limitsFor(const ResourceLimits& normal,
                         const std::optional<ResourceLimits>& big,
                         const store::Derivation& drv) {
  if (!big) return normal;
  auto features = drv.env.find("requiredSystemFeatures");
  if (features == drv.env.end()) return normal;
  std::istringstream words(features->second);
  bool wants = false;
  for (std::string w; words >> w;) wants = wants || w == kBigBuildFeature;
  if (!wants) return normal;
  ResourceLimits r = *big;
  if (!r.memoryMaxBytes) r.memoryMaxBytes = normal.memoryMaxBytes;
  if (!r.pidsMax) r.pidsMax = normal.pidsMax;
  if (!r.cpuWeight) r.cpuWeight = normal.cpuWeight;
  if (!r.diskMaxBytes) r.diskMaxBytes = normal.diskMaxBytes;
  return r;
}

std::shared_ptr<DirectorySize> realDirectorySize() {
  return std::make_shared<RealDirectorySize>();
}

LimitWatch::LimitWatch(const ResourceLimits& limits, BuildCgroup* group,
                       DirectorySize* sizer, std::string buildDir,
                       const Clock& clock, Clock::Duration diskEvery)
    : limits_(limits),
      group_(group),
      sizer_(sizer),
      buildDir_(std::move(buildDir)),
      clock_(clock),
      diskEvery_(diskEvery),
      nextDisk_(clock.now() + diskEvery) {}

std::optional<LimitBreach> LimitWatch::checkGroup() {
  if (!group_ || (!limits_.memoryMaxBytes && !limits_.pidsMax))
    return std::nullopt;
  auto u = group_->usage();
  if (u.oomKills && limits_.memoryMaxBytes)
    return LimitBreach{StepStatus::kOutOfMemory,
                       "build ran out of memory: killed at its memory limit "
                       "of " +
                           formatByteSize(limits_.memoryMaxBytes) +
                           " (--build-memory-max)"};
  if (u.pidsMaxHits && limits_.pidsMax)
    return LimitBreach{StepStatus::kProcessLimitExceeded,
                       "build reached its process limit of " +
                           std::to_string(limits_.pidsMax) +
                           " processes and threads (--build-pids-max)"};
  return std::nullopt;
}

std::optional<LimitBreach> LimitWatch::checkDisk() {
  if (!sizer_) return std::nullopt;
  uint64_t max = limits_.diskMaxBytes;
  uint64_t size = sizer_->measure(buildDir_, max);
  if (size > peakDir_) peakDir_ = size;
  if (max && size > max)
    return LimitBreach{
        StepStatus::kDiskLimitExceeded,
        "build directory grew past its limit of " + formatByteSize(max) +
            " (--build-disk-max): " + formatByteSize(size) + " or more"};
  return std::nullopt;
}

std::optional<LimitBreach> LimitWatch::check() {
  if (auto b = checkGroup()) return b;
  auto now = clock_.now();
  if (now < nextDisk_) return std::nullopt;
  nextDisk_ = now + diskEvery_;
  return limits_.diskMaxBytes ? checkDisk() : std::nullopt;
}

std::optional<LimitBreach> LimitWatch::finalCheck(BuildUsage& usage) {
  auto breach = checkGroup();
  auto disk = checkDisk();
  if (!breach) breach = std::move(disk);
  if (group_) {
    auto u = group_->usage();
    usage.peakMemoryBytes = u.memoryPeakBytes;
    usage.cpuTimeUs = u.cpuTimeUs;
  }
  usage.buildDirBytes = peakDir_;
  return breach;
}

}  // namespace kiln::worker
