#pragma once
// EvalState's thread slots (docs/evaluator.md, "Threaded evaluation"):
// whether threaded evaluation is on, which slot the calling thread
// evaluates as, each slot's call depth, and the waits of threads for
// thunks another thread claimed. Evaluator-internal: EvalState::threads().

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {

class ListHelpers;

/// The slots of the threads that evaluate one EvalState (1..kMaxThreads;
/// 0: the state's own thread outside threaded evaluation).
class ThreadSlots {
 public:
  static constexpr uint32_t kMaxThreads = EvalState::kMaxThreads;

  /// Whether threaded evaluation is on.
  bool active() const { return active_; }
  /// Slots 1..threads may evaluate from now on (EvalState::beginThreads).
  void begin(uint32_t threads);
  /// Back to one thread; every slot's call depth is reset.
  void end();
  /// Makes the calling thread evaluate as `slot` (1..kMaxThreads).
  static void enter(uint32_t slot);
  /// The calling thread no longer evaluates as a slot (current() is 0).
  static void leave();
  /// The calling thread's slot (0 outside threaded evaluation).
  static uint32_t current();
  /// The calling thread's call depth (the state's own when not threaded):
  /// read on every call, so inline but for threaded evaluation.
  uint32_t& depth() {
    return __builtin_expect(active_, 0) ? threadDepth() : callDepth_;
  }
  /// The calling thread's call depth in threaded evaluation.
  uint32_t& threadDepth();
  /// Waits until `v`, claimed by another thread, is no longer a blackhole.
  /// False when the threads' waits form a cycle that persists (infinite
  /// recursion: the caller throws).
  bool waitFor(Value& v);
  /// Marks the calling thread as waiting for its list helpers (or no
  /// longer): waits of other threads for thunks it owns are then cycles.
  void setAwaitingHelpers(bool on) { slots_[current()].awaitsHelpers.store(on); }
  /// Wakes the threads waiting for `v`, which was just published or put
  /// back with kWaitedFlag in the state word it replaced (only theirs: a
  /// thread's wait is not woken by other thunks).
  void wake(const Value& v);
  /// Runs `fn` with the state's shared lock held when threaded.
  template <class F>
  auto withSharedLock(F&& fn) {
    if (!active_) return fn();
    std::lock_guard<std::mutex> lock(sharedMutex_);
    return fn();
  }
  /// Held by builtins while they touch state shared by threads (never
  /// while evaluating).
  std::mutex& sharedMutex() { return sharedMutex_; }
  /// The threads standing by for the strict list builtins while the root
  /// of a collection is evaluated (list_helpers.h), or null; not owned.
  ListHelpers* listHelpers() const { return listHelpers_; }
  void setListHelpers(ListHelpers* h) { listHelpers_ = h; }

 private:
  /// Whether the waits starting at `owner` lead back to `me`.
  bool waitCycle(uint32_t me, uint8_t owner) const;
  /// One evaluating thread's call depth and wait (its allocation lists
  /// are EvalHeap's).
  struct alignas(64) Slot {  // no cache line shared by two threads' slots
    uint32_t callDepth = 0;
    std::atomic<const Value*> waitingFor{nullptr};
    // Waiting for its list helpers to finish their elements (set by the
    // publisher of a ListHelpers run): a helper's wait that leads here is
    // a cycle, since every thunk this thread still owns then is one the
    // run's result is needed for (waitCycle).
    std::atomic<bool> awaitsHelpers{false};
    std::mutex waitMutex;  // with waitCv: this thread's wait for waitingFor
    std::condition_variable waitCv;
  };
  Slot slots_[kMaxThreads + 1];
  uint32_t slotsInUse_ = 0;  // slots 1..slotsInUse_ may evaluate
  bool active_ = false;
  uint32_t callDepth_ = 0;          // outside threaded evaluation
  std::mutex sharedMutex_;
  ListHelpers* listHelpers_ = nullptr;
};

}  // namespace kiln::eval
