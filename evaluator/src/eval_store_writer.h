#pragma once
// EvalState's store writer part: the StoreWriter an evaluation writes its
// store objects to, serialised while threads evaluate. Evaluator-internal:
// EvalState::writer() (callers set it with EvalState::setStoreWriter).

#include <memory>

#include "kiln/evaluator/store_writer.h"

namespace kiln::eval {

/// The writer of one EvalState: the caller's, or while threaded a wrapper
/// that serialises every call to it (threads share one writer).
class EvalStoreWriter {
 public:
  EvalStoreWriter();
  ~EvalStoreWriter();
  EvalStoreWriter(const EvalStoreWriter&) = delete;
  EvalStoreWriter& operator=(const EvalStoreWriter&) = delete;

  /// The writer to use now, or nullptr: nothing is written.
  StoreWriter* get() const { return current_; }
  /// Uses `writer` (not owned; nullptr: none). Not while threaded.
  void set(StoreWriter* writer);
  /// Threaded evaluation: calls go through a lock.
  void beginThreads();
  /// Back to the caller's writer itself.
  void endThreads();

 private:
  class Locked;
  StoreWriter* plain_ = nullptr;    // the caller's
  StoreWriter* current_ = nullptr;  // plain_ or locked_
  std::unique_ptr<Locked> locked_;
};

}  // namespace kiln::eval
