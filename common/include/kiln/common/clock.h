#pragma once
/// The one clock interface of kiln. Everything that reads time (build
/// timeouts, heartbeats, retry back-off, the scheduler's core, timestamps in
/// the databases) asks an injected `Clock`, so tests drive it with
/// `FakeClock` instead of sleeping.
///
/// A clock gives two readings: `now()` is monotonic (for deadlines and
/// durations) and `wallNow()` is Unix time at millisecond resolution (for
/// timestamps that are persisted or shown). Timed waits go through it too
/// (`sleepUntil`, `waitUntil`): a FakeClock moves to the deadline instead
/// of blocking.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

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
  /// Returns once `now()` has reached `t`. The default blocks the thread
  /// (std::this_thread::sleep_until); FakeClock moves to `t` at once.
  virtual void sleepUntil(TimePoint t) const;
  /// sleepUntil(now() + d).
  void sleepFor(Duration d) const { sleepUntil(now() + d); }
  /// With `lock` held on `cv`'s mutex: waits until `pred` holds or
  /// `deadline` passes, and returns pred(). The default waits on `cv`
  /// (woken by its notifications); FakeClock checks `pred`, and if it does
  /// not hold moves to `deadline` and checks it once more.
  virtual bool waitUntil(std::condition_variable& cv,
                         std::unique_lock<std::mutex>& lock, TimePoint deadline,
                         const std::function<bool()>& pred) const;
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
      : wall_(std::chrono::duration_cast<Duration>(wallStart.time_since_epoch())
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
  /// Moves both readings forward to monotonic time `t` (if later).
  void sleepUntil(TimePoint t) const override;
  /// pred(), else moves to `deadline` and returns pred() (nothing waits).
  bool waitUntil(std::condition_variable& cv,
                 std::unique_lock<std::mutex>& lock, TimePoint deadline,
                 const std::function<bool()>& pred) const override;

 private:
  // Mutable: a sleep through a `const Clock&` moves a fake clock.
  mutable std::atomic<Duration::rep> mono_{
      Duration(std::chrono::hours(1)).count()};
  mutable std::atomic<Duration::rep> wall_;
};

}  // namespace kiln
