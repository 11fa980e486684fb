#pragma once
/// A monotonic clock behind an interface, so that code with deadlines
/// (build timeouts, heartbeats, retry back-off) can be driven by a fake
/// clock in tests.

#include <atomic>
#include <chrono>

namespace kiln {

/// Source of monotonic time. Implementations are thread-safe.
class Clock {
 public:
  using Duration = std::chrono::steady_clock::duration;
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  /// The current monotonic time.
  virtual TimePoint now() const = 0;
};

/// std::chrono::steady_clock.
class RealClock : public Clock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
  /// A process-wide instance (the class has no state).
  static RealClock& instance();
};

/// A clock that only moves when told to. Starts at an arbitrary fixed epoch.
class FakeClock : public Clock {
 public:
  TimePoint now() const override { return TimePoint(Duration(now_.load())); }
  /// Moves the clock forward by `d` (negative durations are ignored).
  void advance(Duration d) {
    if (d.count() > 0) now_ += d.count();
  }

 private:
  std::atomic<Duration::rep> now_{Duration(std::chrono::hours(1)).count()};
};

}  // namespace kiln
