#pragma once
/// `Sync<T>`: data kept together with the mutex that guards it.
///
///   Sync<std::map<int, int>> m;
///   m.lock()->emplace(1, 2);   // the lock lives as long as the handle

#include <condition_variable>
#include <mutex>
#include <utility>

#include "kiln/common/clock.h"

namespace kiln {

/// Owns a `T` and a mutex; the only access is through `lock()`.
template <typename T>
class Sync {
 public:
  Sync() = default;
  explicit Sync(T data) : data_(std::move(data)) {}

  /// A locked view of the data; unlocks when destroyed.
  class Lock {
   public:
    explicit Lock(Sync* s) : s_(s), lk_(s->mutex_) {}
    T* operator->() { return &s_->data_; }
    T& operator*() { return s_->data_; }
    /// Waits on the Sync's condition variable, releasing the lock meanwhile.
    template <typename Pred>
    void wait(Pred pred) { s_->cv_.wait(lk_, pred); }
    /// As wait() with a deadline; returns pred() at the end.
    template <typename C, typename Dur, typename Pred>
    bool waitUntil(std::chrono::time_point<C, Dur> t, Pred pred) {
      return s_->cv_.wait_until(lk_, t, pred);
    }
    /// As wait() until `clock` reaches `deadline` (Clock::waitUntil, so a
    /// FakeClock's rules for waits apply); returns pred().
    template <typename Pred>
    bool waitUntil(const Clock& clock, Clock::TimePoint deadline, Pred pred) {
      return clock.waitUntil(s_->cv_, lk_, deadline, pred);
    }

   private:
    Sync* s_;
    std::unique_lock<std::mutex> lk_;
  };

  /// Locks the mutex and returns a handle to the data.
  Lock lock() { return Lock(this); }
  /// Wakes every waiter (call after changing the data).
  void notifyAll() { cv_.notify_all(); }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  T data_;
};

}  // namespace kiln
