#include "kiln/common/clock.h"

#include <algorithm>
#include <thread>

namespace kiln {

void Clock::sleepUntil(TimePoint t) const { std::this_thread::sleep_until(t); }

bool Clock::waitUntil(std::condition_variable& cv,
                      std::unique_lock<std::mutex>& lock, TimePoint deadline,
                      const std::function<bool()>& pred) const {
  return cv.wait_until(lock, deadline, pred);
}

RealClock& RealClock::instance() {
  static RealClock clock;
  return clock;
}

namespace {

// A blocked waitUntil is woken by advance() through its condition variable,
// but advance() cannot take the waiter's mutex (lock order), so a wake-up
// may land between the waiter's check of the time and its wait: the waiter
// then re-checks after this much real time at the latest.
constexpr auto kLostWakeupBackstop = std::chrono::milliseconds(10);

}  // namespace

bool FakeClock::jumps() const {
  return waits_ == Waits::kJumpEverywhere ||
         std::this_thread::get_id() == owner_;
}

void FakeClock::advance(Duration d) {
  wall_ += d.count();
  if (d.count() > 0) mono_ += d.count();
  wakeAll();
}

void FakeClock::moveTo(Duration::rep target) const {
  // Moves forward only, and only by what another thread has not moved it
  // already.
  Duration::rep cur = mono_.load();
  while (cur < target) {
    if (mono_.compare_exchange_weak(cur, target)) {
      wall_ += target - cur;
      break;
    }
  }
  wakeAll();
}

void FakeClock::wakeAll() const {
  // Under the mutex: a sleeper checks the time under it, so it is either
  // before its check or inside its wait; a registered cv is alive while
  // listed.
  std::lock_guard lk(waitersMu_);
  moved_.notify_all();
  for (auto* cv : waiters_) cv->notify_all();
}

int FakeClock::blockedWaits() const {
  std::lock_guard lk(waitersMu_);
  return blocked_;
}

void FakeClock::sleepUntil(TimePoint t) const {
  Duration::rep target = t.time_since_epoch().count();
  if (jumps()) return moveTo(target);
  std::unique_lock lk(waitersMu_);
  ++blocked_;
  moved_.wait(lk, [&] { return mono_.load() >= target; });
  --blocked_;
}

bool FakeClock::waitUntil(std::condition_variable& cv,
                          std::unique_lock<std::mutex>& lock,
                          TimePoint deadline,
                          const std::function<bool()>& pred) const {
  if (pred()) return true;
  if (jumps()) {
    moveTo(deadline.time_since_epoch().count());
    return pred();
  }
  struct Listed {  // on the list of waits that advance() wakes
    const FakeClock& c;
    std::condition_variable& cv;
    Listed(const FakeClock& c, std::condition_variable& cv) : c(c), cv(cv) {
      std::lock_guard lk(c.waitersMu_);
      c.waiters_.push_back(&cv);
      ++c.blocked_;
    }
    ~Listed() {
      std::lock_guard lk(c.waitersMu_);
      c.waiters_.erase(std::find(c.waiters_.begin(), c.waiters_.end(), &cv));
      --c.blocked_;
    }
  } listed(*this, cv);
  bool held = false;
  while (!(held = pred()) && now() < deadline)
    cv.wait_for(lock, kLostWakeupBackstop);
  return held;
}

}  // namespace kiln
