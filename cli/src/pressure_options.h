#pragma once
/// The pressure thresholds of `kiln worker` and `kiln serve` (its local
/// workers and `[local_workers]`): over any of them the scheduler sends the
/// worker no new step (docs/worker.md, "Pressure").

#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "kiln/protocol/messages.h"

namespace kiln::cli {

/// The thresholds as written ("" = not given).
struct PressureOptions {
  std::string maxLoadAverage;     ///< --max-load-average N
  std::string maxMemoryPressure;  ///< --max-memory-pressure PERCENT
  std::string maxCpuPressure;     ///< --max-cpu-pressure PERCENT
  std::string maxIoPressure;      ///< --max-io-pressure PERCENT
  std::string minFreeDisk;        ///< --min-free-disk SIZE
  bool operator==(const PressureOptions&) const = default;
};

/// Adds the five options to `opts`.
void addPressureOptions(boost::program_options::options_description& opts,
                        PressureOptions& out);

/// The same as `kiln worker` arguments.
std::vector<std::string> pressureArgs(const PressureOptions& o);

/// The thresholds. Throws Error naming the option for a bad value.
protocol::PressureThresholds parsePressureOptions(const PressureOptions& o);

/// Fills the options `o` does not give from `fallback` (serve's config
/// under its command line).
void mergePressureOptions(PressureOptions& o, const PressureOptions& fallback);

}  // namespace kiln::cli
