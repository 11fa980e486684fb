#pragma once
/// The one clock interface of kiln. Everything that reads time (build
/// timeouts, heartbeats, retry back-off, the scheduler's core, timestamps in
/// the databases) asks an injected `Clock`, so tests drive it with
/// `FakeClock` instead of sleeping.
///
/// A clock gives two readings: `now()` is monotonic (for deadlines and
/// durations) and `wallNow()` is Unix time at millisecond resolution (for
/// timestamps that are persisted or shown). Timed waits go through it too
/// (`sleepUntil`, `waitUntil`): on the test's own thread a FakeClock moves
/// to the deadline instead of blocking; a wait on another thread blocks
/// until the test moves the clock past its deadline (see FakeClock::Waits).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

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
  /// (std::this_thread::sleep_until); for FakeClock see FakeClock::Waits.
  virtual void sleepUntil(TimePoint t) const;
  /// sleepUntil(now() + d).
  void sleepFor(Duration d) const { sleepUntil(now() + d); }
  /// With `lock` held on `cv`'s mutex: waits until `pred` holds or
  /// `deadline` passes, and returns pred(). The default waits on `cv`
  /// (woken by its notifications); for FakeClock see FakeClock::Waits.
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
  /// What a wait that would block does (`sleepUntil`, and `waitUntil` when
  /// its predicate does not hold).
  enum class Waits {
    /// On the thread that made the clock (the test's), the wait moves the
    /// clock to its deadline at once. On any other thread (a background
    /// loop of the code under test) it blocks until `advance()` or a wait
    /// on the test's thread moves the clock to the deadline, or, in
    /// `waitUntil`, until its condition variable is notified and the
    /// predicate holds: such a loop neither spins nor moves time itself.
    kJumpOnOwnThread,
    /// Every wait, on any thread, moves the clock to its deadline (for a
    /// test whose code under test waits on a thread of its own and must
    /// not block; the test then accepts that time runs ahead).
    kJumpEverywhere,
  };

  explicit FakeClock(WallTime wallStart = WallTime{},
                     Waits waits = Waits::kJumpOnOwnThread)
      : wall_(std::chrono::duration_cast<Duration>(wallStart.time_since_epoch())
                  .count()),
        waits_(waits),
        owner_(std::this_thread::get_id()) {}
  TimePoint now() const override { return TimePoint(Duration(mono_.load())); }
  WallTime wallNow() const override {
    return WallTime(std::chrono::duration_cast<std::chrono::milliseconds>(
        Duration(wall_.load())));
  }
  /// Moves both readings forward by `d` and wakes the waits it ends. A
  /// negative `d` moves only the wall reading back (the monotonic one never
  /// goes back).
  void advance(Duration d);
  /// Sets the wall reading to `t` (the monotonic one is unchanged).
  void set(WallTime t) {
    wall_ = std::chrono::duration_cast<Duration>(t.time_since_epoch()).count();
  }
  /// Returns once monotonic time `t` is reached: moves there (if later) or
  /// blocks, as `Waits` says for this thread.
  void sleepUntil(TimePoint t) const override;
  /// pred(); else moves to `deadline` and returns pred(), or blocks until
  /// pred() holds or the clock reaches `deadline`, as `Waits` says.
  bool waitUntil(std::condition_variable& cv,
                 std::unique_lock<std::mutex>& lock, TimePoint deadline,
                 const std::function<bool()>& pred) const override;
  /// Waits blocked on threads other than the test's, now (for a test that
  /// polls until its background loop is idle before advancing).
  int blockedWaits() const;

 private:
  bool jumps() const;
  // Moves the monotonic reading to `target` if later; wakes blocked waits.
  void moveTo(Duration::rep target) const;
  void wakeAll() const;

  // Mutable: a sleep through a `const Clock&` moves a fake clock.
  mutable std::atomic<Duration::rep> mono_{
      Duration(std::chrono::hours(1)).count()};
  mutable std::atomic<Duration::rep> wall_;
  const Waits waits_;
  const std::thread::id owner_;
  // Blocked waits: sleepers on `moved_`, waitUntil's on their own `cv`.
  mutable std::mutex waitersMu_;
  mutable std::condition_variable moved_;
  mutable std::vector<std::condition_variable*> waiters_;
  mutable int blocked_ = 0;
};

}  // namespace kiln
