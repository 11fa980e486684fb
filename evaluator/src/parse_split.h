#pragma once
// Parsing a large file on two threads (docs/evaluator.md, "Parsing a large
// file on two threads"): a speculative split, validated. A second thread
// parses the bindings that start at a guessed offset after the middle of
// the file; the main parser, if it reaches exactly that offset at the
// start of a binding, adds them (in order, through the same code as its
// own, so merges and duplicate errors are as serial) and goes on after
// them. Otherwise, or if the second thread failed, its work is dropped and
// the main parser goes on alone: results and errors never change.

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "parser.h"

namespace kiln::eval {

/// Files at least this large are split when EvalSettings::parseThreads
/// allows (starting a thread costs tens of microseconds; a quarter of a
/// megabyte takes several milliseconds to parse).
constexpr size_t kParseSplitBytes = 256 << 10;

/// guessSplitOffset's answer when it found no binding start.
constexpr size_t kNoSplit = 0;

/// The offset of a likely binding start after the middle of `text`: the
/// first line from there that reads `<indent>name =` (name an identifier,
/// a dotted path of them or a plain "string"; not `==`), at the name; or
/// kNoSplit if none in the third quarter.
size_t guessSplitOffset(std::string_view text);

/// What a split's second thread parsed.
struct SplitResult {
  bool ok = false;             ///< parsed up to a '}' or `in` with no error
  Tok terminator = Tok::kEof;  ///< the token that ended the bindings
  size_t end = 0;              ///< its offset
  int maxDepth = 0;            ///< deepest nesting, from 0 at the bindings
  std::vector<PendingBind> binds;
  std::vector<ExprAttrs*> open;  ///< its sets, arrays still malloc'd
};

/// The second thread of a split parse and its result.
class ParseSplit {
 public:
  /// Starts parsing `text` (the main parser's source `origin`) from
  /// `offset` on a new thread; makes the arena and symbol table shared
  /// meanwhile if they were not.
  ParseSplit(EvalState& state, const std::string& text, uint32_t origin,
             const std::string& basePath, size_t offset);
  ParseSplit(const ParseSplit&) = delete;
  ParseSplit& operator=(const ParseSplit&) = delete;
  /// Cancels the thread if still running, joins it, frees what was not
  /// taken, and makes the arena and symbol table unshared again.
  ~ParseSplit();
  /// Where the second thread started.
  size_t offset() const { return offset_; }
  /// Waits for the second thread; its result.
  SplitResult& wait();
  /// Records that the main parser used the result (KILN_EVAL_CPU_TIMES
  /// prints, per split, whether it was used).
  void markTaken() { taken_ = true; }

 private:
  static void* run(void* self);
  void join();

  EvalState& state_;
  const std::string& text_;
  size_t offset_;
  std::unique_ptr<Parser> helper_;
  SplitResult result_;
  std::atomic<bool> cancel_{false};
  pthread_t thread_{};
  bool running_ = false;
  bool madeShared_ = false;
  bool taken_ = false;
  uint32_t origin_;
};

}  // namespace kiln::eval
