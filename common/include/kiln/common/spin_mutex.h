#pragma once
/// A mutex for critical sections of well under a microsecond that several
/// threads enter often (the evaluator's derivation memo): a waiter spins,
/// then yields its core, instead of sleeping in the kernel. A futex sleep
/// and wake cost tens of microseconds in a virtual machine, more than the
/// section itself. Not for sections that can block or run long.

#include <atomic>
#include <thread>

namespace kiln {

/// Lockable (std::unique_lock, std::lock_guard). Not recursive.
class SpinMutex {
 public:
  void lock() {
    for (unsigned spins = 0; !try_lock(); ++spins) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < kSpinsBeforeYield) {
          cpuRelax();
        } else {
          std::this_thread::yield();  // the holder may be off its core
        }
      }
    }
  }
  bool try_lock() { return !locked_.exchange(true, std::memory_order_acquire); }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  static void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
  static constexpr unsigned kSpinsBeforeYield = 2000;
  std::atomic<bool> locked_{false};
};

}  // namespace kiln
