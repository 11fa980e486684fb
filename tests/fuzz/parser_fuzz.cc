// libFuzzer target for the Nix parser: any byte string must either parse or
// raise an EvalError (ParseError); never crash, hang or overflow the stack.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/evaluator/eval_state.h"

namespace {

// One state for many inputs: building the base environment per input
// would dominate. Its arena grows with every input (a 5-minute run reached
// 1.2 GB), so it is replaced every kInputsPerState inputs to keep long runs
// under -rss_limit_mb=2048 without hiding a real blow-up in one input.
constexpr size_t kInputsPerState = 20000;

kiln::eval::EvalState& state() {
  static std::unique_ptr<kiln::eval::EvalState> st;
  static size_t uses = 0;
  if (!st || ++uses % kInputsPerState == 0) {
    st.reset();
    st = std::make_unique<kiln::eval::EvalState>();
  }
  return *st;
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
