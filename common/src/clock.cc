#include "kiln/common/clock.h"

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

void FakeClock::sleepUntil(TimePoint t) const {
  // Moves forward only, and only by what another thread has not moved it
  // already.
  Duration::rep target = t.time_since_epoch().count();
  Duration::rep cur = mono_.load();
  while (cur < target) {
    if (mono_.compare_exchange_weak(cur, target)) {
      wall_ += target - cur;
      return;
    }
  }
}

bool FakeClock::waitUntil(std::condition_variable&,
                          std::unique_lock<std::mutex>&, TimePoint deadline,
                          const std::function<bool()>& pred) const {
  if (pred()) return true;
  sleepUntil(deadline);
  return pred();
}

}  // namespace kiln
