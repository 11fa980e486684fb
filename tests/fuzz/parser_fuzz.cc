// libFuzzer target for the Nix parser: any byte string must either parse or
// raise an EvalError (ParseError); never crash, hang or overflow the stack.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kiln/evaluator/eval_state.h"

namespace {

// One state for the whole run: building the base environment per input
// would dominate. The arena grows with every input, which is fine for runs
// of minutes (libFuzzer's -rss_limit_mb guards against surprises).
kiln::eval::EvalState& state() {
  static kiln::eval::EvalState st;
  return st;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  kiln::eval::EvalState& st = state();
  // Parsing is recursive descent: run it with the big stack kiln's CLIs use.
  kiln::eval::runWithLargeStack([&] {
    try {
      st.parseExprFromString(text, "/fuzz");
    } catch (const kiln::eval::EvalError&) {
      // Rejected input: the expected outcome for most mutations.
    }
  });
  return 0;
}
