#pragma once
/// What a worker reports about its machine in its heartbeats besides its
/// load and free disk (docs/worker.md, "Pressure"): memory, CPU and IO
/// pressure (Linux's pressure stall information, /proc/pressure) and the
/// available memory (/proc/meminfo). Read behind an interface so that
/// tests can set the figures.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::worker {

/// One reading; a figure that could not be read is absent.
struct MachinePressure {
  /// "some" avg10 of each resource: the share of the last 10 seconds in
  /// which some task stalled on it, in percent.
  std::optional<double> memory;
  std::optional<double> cpu;
  std::optional<double> io;
  /// MemAvailable, bytes.
  std::optional<uint64_t> freeMemory;
};

/// Where the figures come from. Called from the daemon's socket thread.
class PressureSource {
 public:
  virtual ~PressureSource() = default;
  /// The figures now. Never throws: an unreadable one is absent.
  virtual MachinePressure read() = 0;
};

/// Reads `<procRoot>/pressure/{memory,cpu,io}` and `<procRoot>/meminfo`
/// ("/proc" on a real host; another folder holding files of the same
/// format stands in for it in tests).
std::unique_ptr<PressureSource> procPressureSource(std::string procRoot);

/// The "some avg10=" value of a /proc/pressure file, if well formed and
/// within 0..100.
std::optional<double> parsePsiSome(std::string_view text);

/// The MemAvailable line of /proc/meminfo, in bytes.
std::optional<uint64_t> parseMemAvailable(std::string_view text);

}  // namespace kiln::worker
