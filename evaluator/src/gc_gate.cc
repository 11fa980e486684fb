// The gate in front of the collector's allocator (gc_support.h).
//
// libgc guards its allocator with one pthread mutex, which sleeps (a futex
// wait) as soon as it is contended. Threaded evaluation's threads refill
// their free lists from it once per 4 KiB heap block, ~175,000 times in a
// gen-pkgset 50,000 run, and with two threads ~13,000 refills a thread
// found it held: each then slept and was woken by a system call, ~1 s of
// futex time a thread (`perf trace`). The collector holds the lock for a
// few microseconds, so a waiter here spins that long first and sleeps only
// when the holder takes longer (a collection, or a page fault on new heap).
// Behind the gate the collector's mutex is almost never contended.
#include <immintrin.h>

#include <atomic>

#include "gc_support.h"

namespace kiln::eval {

namespace {

// 0: free; 1: held; 2: held, and a thread may be sleeping on it.
std::atomic<uint32_t> gate{0};

// ~20-40 us of pauses before sleeping: longer than a refill holds it.
constexpr int kSpins = 1000;

}  // namespace

void lockCollectorGate() {
  uint32_t free = 0;
  if (gate.compare_exchange_strong(free, 1, std::memory_order_acquire)) return;
  for (int i = 0; i < kSpins; ++i) {
    _mm_pause();
    free = 0;
    if (gate.load(std::memory_order_relaxed) == 0 &&
        gate.compare_exchange_weak(free, 1, std::memory_order_acquire))
      return;
  }
  // Mark it contended; whoever unlocks then wakes a sleeper.
  while (gate.exchange(2, std::memory_order_acquire) != 0)
    gate.wait(2, std::memory_order_relaxed);
}

void unlockCollectorGate() {
  if (gate.exchange(0, std::memory_order_release) == 2) gate.notify_one();
}

}  // namespace kiln::eval
