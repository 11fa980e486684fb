#pragma once
/// Time for the scheduler's policy core. The core never reads the wall clock
/// itself: it asks an injected `Clock`, so tests drive it with `FakeClock`.

#include <chrono>

namespace kiln::scheduler {

/// Durations inside the core (millisecond resolution).
using Duration = std::chrono::milliseconds;
/// Instants inside the core: milliseconds since the Unix epoch, so that the
/// service can persist them in its database as integers.
using TimePoint = std::chrono::time_point<std::chrono::system_clock, Duration>;

/// Source of the current time. Implementations must be monotone enough for
/// the caller's purposes; the core tolerates time standing still.
class Clock {
 public:
  virtual ~Clock() = default;
  /// The current instant.
  virtual TimePoint now() const = 0;
};

/// The real clock (`std::chrono::system_clock`), for the service.
class SystemClock final : public Clock {
 public:
  TimePoint now() const override;
};

/// A clock that moves only when told to; for tests and simulations.
class FakeClock final : public Clock {
 public:
  /// Starts at `start` (the epoch by default).
  explicit FakeClock(TimePoint start = TimePoint{}) : now_(start) {}
  TimePoint now() const override { return now_; }
  /// Moves time forward by `d` (a negative `d` is allowed: tests may need it).
  void advance(Duration d) { now_ += d; }
  /// Jumps to `t`.
  void set(TimePoint t) { now_ = t; }

 private:
  TimePoint now_;
};

}  // namespace kiln::scheduler
