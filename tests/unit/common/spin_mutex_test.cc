// SpinMutex: mutual exclusion between threads, try_lock, std lock types.
#include "kiln/common/spin_mutex.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

namespace kiln {
namespace {

TEST(SpinMutex, TryLockFailsWhileHeldAndSucceedsAfter) {
  SpinMutex m;
  ASSERT_TRUE(m.try_lock());
  EXPECT_FALSE(m.try_lock());
  m.unlock();
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

TEST(SpinMutex, ThreadsNeverEnterTogether) {
  SpinMutex m;
  long counter = 0;  // unsynchronised but for the mutex
  int inside = 0;
  bool overlapped = false;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50000; ++i) {
        std::lock_guard<SpinMutex> lock(m);
        if (++inside != 1) overlapped = true;
        ++counter;
        --inside;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_FALSE(overlapped);
  EXPECT_EQ(counter, 4 * 50000);
}

TEST(SpinMutex, AWaiterGetsTheLockWhenTheHolderIsSlow) {
  SpinMutex m;
  std::unique_lock<SpinMutex> held(m);
  bool got = false;
  std::thread waiter([&] {
    std::lock_guard<SpinMutex> lock(m);  // spins, then yields
    got = true;
  });
  std::this_thread::yield();
  held.unlock();
  waiter.join();
  EXPECT_TRUE(got);
}

}  // namespace
}  // namespace kiln
