#pragma once
/// The per-build limits of `kiln worker`, `kiln serve` (its local workers
/// and `[local_workers]`) and `kiln build` (docs/worker.md, "Limits per
/// build"), as given and parsed strictly.

#include <boost/program_options.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kiln/worker/limit_watch.h"

namespace kiln::cli {

/// The limits as written ("" = not given).
struct BuildLimitOptions {
  std::string memoryMax;  ///< --build-memory-max SIZE
  std::string pidsMax;    ///< --build-pids-max N
  std::string cpuWeight;  ///< --build-cpu-weight 1..10000
  std::string diskMax;    ///< --build-disk-max SIZE
  /// --big-build-limits memory-max=SIZE,pids-max=N,cpu-weight=W,disk-max=SIZE
  std::string bigBuild;
  bool operator==(const BuildLimitOptions&) const = default;
};

/// Adds the five options to `opts`.
void addBuildLimitOptions(boost::program_options::options_description& opts,
                          BuildLimitOptions& out);

/// The same as `kiln worker` arguments.
std::vector<std::string> buildLimitArgs(const BuildLimitOptions& o);

/// The limits of every build. Throws Error naming the option for a bad
/// value.
worker::ResourceLimits parseBuildLimits(const BuildLimitOptions& o);

/// The limits of builds requiring worker::kBigBuildFeature; nullopt when
/// --big-build-limits is not given. Throws Error for a bad value.
std::optional<worker::ResourceLimits> parseBigBuildLimits(
    const BuildLimitOptions& o);

}  // namespace kiln::cli
