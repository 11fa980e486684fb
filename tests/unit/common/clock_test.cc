// Timed waits through the Clock (kiln/common/clock.h): a FakeClock moves
// to the deadline instead of blocking, so code that pauses or waits with a
// deadline is tested without sleeping; retryWithBackoff pauses through it.
#include "kiln/common/clock.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

#include "kiln/common/retry.h"
#include "test_support.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;

TEST(ClockWaits, AFakeClockMovesToWhereItSleepsUntil) {
  FakeClock clock(WallTime{std::chrono::milliseconds(1000)});
  auto t0 = clock.now();
  clock.sleepUntil(t0 + 5s);
  EXPECT_EQ(clock.now() - t0, 5s);
  EXPECT_EQ(clock.nowMs(), 6000);  // the wall reading moves with it
  clock.sleepUntil(t0 + 1s);       // the past: nothing moves
  EXPECT_EQ(clock.now() - t0, 5s);
  const Clock& c = clock;  // callers hold a const Clock&
  c.sleepFor(250ms);
  EXPECT_EQ(clock.now() - t0, 5250ms);
}

TEST(ClockWaits, AFakeClocksWaitEndsAtTheDeadlineUnlessThePredicateHolds) {
  FakeClock clock;
  std::mutex m;
  std::condition_variable cv;
  std::unique_lock lock(m);
  auto t0 = clock.now();
  bool ready = true;
  EXPECT_TRUE(clock.waitUntil(cv, lock, t0 + 10s, [&] { return ready; }));
  EXPECT_EQ(clock.now(), t0);  // nothing to wait for
  ready = false;
  EXPECT_FALSE(clock.waitUntil(cv, lock, t0 + 10s, [&] { return ready; }));
  EXPECT_EQ(clock.now() - t0, 10s);
}

TEST(ClockWaits, AWaitOnAnotherThreadBlocksUntilTheTestAdvancesTheClock) {
  FakeClock clock;
  auto t0 = clock.now();
  std::atomic<bool> woke{false};
  std::thread loop([&] {
    clock.sleepFor(10s);
    woke = true;
  });
  ASSERT_TRUE(test::pollUntil([&] { return clock.blockedWaits() == 1; }, 10s));
  EXPECT_EQ(clock.now(), t0);  // the other thread's sleep moved nothing
  clock.advance(9s);
  EXPECT_FALSE(woke);  // not yet its deadline (it may still re-check)
  clock.advance(1s);
  loop.join();
  EXPECT_TRUE(woke);
  EXPECT_EQ(clock.now() - t0, 10s);
}

TEST(ClockWaits, AWaitOnAnotherThreadEndsWhenItsConditionIsNotified) {
  FakeClock clock;
  auto t0 = clock.now();
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;
  int rounds = 0;
  std::thread loop([&] {
    std::unique_lock lock(m);
    // An idle poll: a round per 5 s of fake time until stopped.
    while (!clock.waitUntil(cv, lock, clock.now() + 5s, [&] { return stop; }))
      ++rounds;
  });
  ASSERT_TRUE(test::pollUntil([&] { return clock.blockedWaits() == 1; }, 10s));
  EXPECT_EQ(clock.now(), t0);  // the loop neither spins nor moves time
  clock.advance(5s);
  ASSERT_TRUE(test::pollUntil(
      [&] {
        std::lock_guard l(m);
        return rounds == 1 && clock.blockedWaits() == 1;
      },
      10s));
  {
    std::lock_guard l(m);
    stop = true;
  }
  cv.notify_all();
  loop.join();
  EXPECT_EQ(rounds, 1);
  EXPECT_EQ(clock.now() - t0, 5s);
  EXPECT_EQ(clock.blockedWaits(), 0);
}

TEST(ClockWaits, AJumpOnTheTestsThreadWakesTheOtherThreadsWaits) {
  FakeClock clock;
  auto t0 = clock.now();
  std::thread loop([&] { clock.sleepUntil(t0 + 3s); });
  ASSERT_TRUE(test::pollUntil([&] { return clock.blockedWaits() == 1; }, 10s));
  clock.sleepFor(4s);  // the test's own thread jumps
  loop.join();
  EXPECT_EQ(clock.now() - t0, 4s);
}

TEST(ClockWaits, AClockThatJumpsEverywhereMovesOnAnyThread) {
  FakeClock clock(WallTime{}, FakeClock::Waits::kJumpEverywhere);
  auto t0 = clock.now();
  std::thread([&] { clock.sleepFor(7s); }).join();
  EXPECT_EQ(clock.now() - t0, 7s);
}

TEST(ClockWaits, TheRealClockWaitsOnTheConditionVariable) {
  const Clock& clock = RealClock::instance();
  std::mutex m;
  std::condition_variable cv;
  std::unique_lock lock(m);
  EXPECT_TRUE(clock.waitUntil(cv, lock, clock.now() + 1h, [] { return true; }));
  EXPECT_FALSE(
      clock.waitUntil(cv, lock, clock.now() - 1s, [] { return false; }));
  auto before = clock.now();
  clock.sleepUntil(before - 1s);  // the past: returns at once
  EXPECT_GE(clock.now(), before);
}

TEST(ClockWaits, RetryWithBackoffPausesThroughTheClock) {
  FakeClock clock;
  auto t0 = clock.now();
  int calls = 0;
  retryWithBackoff<std::runtime_error>(
      [&] {
        if (++calls < 4) throw std::runtime_error("busy");
      },
      [](const std::runtime_error&) { return true; }, 1000ms, 100ms, clock);
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(clock.now() - t0, 1ms + 2ms + 4ms);
  // Past the timeout (in fake time) the error propagates.
  calls = 0;
  EXPECT_THROW(
      retryWithBackoff<std::runtime_error>(
          [&] {
            ++calls;
            throw std::runtime_error("busy");
          },
          [](const std::runtime_error&) { return true; }, 50ms, 8ms, clock),
      std::runtime_error);
  EXPECT_EQ(calls, 10);  // pauses of 1, 2, 4, then 8 ms: the 10th at 55 ms
}

}  // namespace
}  // namespace kiln
