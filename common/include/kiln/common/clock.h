#pragma once
/// The one clock interface of kiln. Everything that reads time (build
/// timeouts, heartbeats, retry back-off, the scheduler's core, timestamps in
/// the databases) asks an injected `Clock`, so tests drive it with
/// `FakeClock` instead of sleeping.
///
/// A clock gives two readings: `now()` is monotonic (for deadlines and
/// durations) and `wallNow()` is Unix time at millisecond resolution (for
/// timestamps that are persisted or shown).

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kiln {

/// Unix time at millisecond resolution (persisted as an integer).
using WallTime = std::chrono::time_point<std::chrono::system_clock,
                                         std::chrono::milliseconds>;

/// Source of time. Implementations are thread-safe.
class Clock {
 public:
  using Duration = std::chrono::steady_clock::duration;
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  /// The current monotonic time.
  virtual TimePoint now() const = 0;
  /// The current Unix time (milliseconds).
  virtual WallTime wallNow() const = 0;
  /// `wallNow()` as milliseconds since the epoch.
  int64_t nowMs() const { return wallNow().time_since_epoch().count(); }
};

/// std::chrono::steady_clock and std::chrono::system_clock.
class RealClock final : public Clock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
  WallTime wallNow() const override {
    return std::chrono::time_point_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now());
  }
  /// A process-wide instance (the class has no state).
  static RealClock& instance();
};

/// A clock that only moves when told to. The monotonic reading starts at an
/// arbitrary fixed epoch, the wall reading at `wallStart`.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(WallTime wallStart = WallTime{})
      : wall_(std::chrono::duration_cast<Duration>(
                  wallStart.time_since_epoch())
                  .count()) {}
  TimePoint now() const override { return TimePoint(Duration(mono_.load())); }
  WallTime wallNow() const override {
    return WallTime(std::chrono::duration_cast<std::chrono::milliseconds>(
        Duration(wall_.load())));
  }
  /// Moves both readings forward by `d`. A negative `d` moves only the wall
  /// reading back (the monotonic one never goes back).
  void advance(Duration d) {
    wall_ += d.count();
    if (d.count() > 0) mono_ += d.count();
  }
  /// Sets the wall reading to `t` (the monotonic one is unchanged).
  void set(WallTime t) {
    wall_ = std::chrono::duration_cast<Duration>(t.time_since_epoch()).count();
  }

 private:
  std::atomic<Duration::rep> mono_{Duration(std::chrono::hours(1)).count()};
  std::atomic<Duration::rep> wall_;
};

}  // namespace kiln
