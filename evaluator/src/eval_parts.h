#pragma once
// The parts of an EvalState (docs/architecture.md, "The evaluator's
// parts"), each with its own header and a narrow interface, and the inline
// accessors that reach them. Evaluator-internal: callers outside the
// evaluator see only kiln/evaluator/eval_state.h.

#include <new>

#include "builtin_table.h"
#include "eval_heap.h"
#include "eval_store_writer.h"
#include "file_cache.h"
#include "kiln/evaluator/eval_state.h"
#include "thread_slots.h"

namespace kiln::eval {

/// Every part of one EvalState, constructed in the state's own storage
/// (EvalState::parts_) by its constructor, in this order.
class EvalParts {
 public:
  explicit EvalParts(EvalState& state)
      : heap(state.arena, state.permanent, threads.sharedMutex()), builtins(state) {}

  ThreadSlots threads;
  EvalHeap heap;
  FileCache files;
  EvalStoreWriter writer;
  BuiltinTable builtins;

  /// The parts of `state`.
  static EvalParts& of(EvalState& state) {
    return *std::launder(reinterpret_cast<EvalParts*>(state.parts_));
  }
  static const EvalParts& of(const EvalState& state) {
    return *std::launder(reinterpret_cast<const EvalParts*>(state.parts_));
  }
  /// Constructs the parts of `state` in its storage.
  static void construct(EvalState& state) {
    static_assert(sizeof(EvalParts) <= EvalState::kPartsBytes,
                  "EvalState::kPartsBytes is too small for EvalParts");
    static_assert(EvalState::kPartsBytes - sizeof(EvalParts) < 4096,
                  "EvalState::kPartsBytes wastes more than 4 KiB: lower it");
    static_assert(alignof(EvalParts) <= 64);
    new (state.parts_) EvalParts(state);
  }
  /// Destroys them (the state's destructor).
  static void destroy(EvalState& state) { of(state).~EvalParts(); }
};

inline EvalHeap& EvalState::heap() { return EvalParts::of(*this).heap; }
inline ThreadSlots& EvalState::threads() { return EvalParts::of(*this).threads; }
inline FileCache& EvalState::files() { return EvalParts::of(*this).files; }
inline EvalStoreWriter& EvalState::writer() { return EvalParts::of(*this).writer; }
inline BuiltinTable& EvalState::builtins() { return EvalParts::of(*this).builtins; }

inline std::unique_lock<std::mutex> EvalState::lockIfThreaded(std::mutex& m) const {
  return EvalParts::of(*this).threads.active() ? std::unique_lock<std::mutex>(m)
                                               : std::unique_lock<std::mutex>();
}

inline void EvalState::mkList(Value& v, size_t n) { v.mkList(n, heap().allocList(n)); }

}  // namespace kiln::eval
