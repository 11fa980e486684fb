#pragma once
// Helpers for evaluator unit tests: evaluate an expression and print it the
// way `kiln instantiate --eval --strict` does.
#include <sstream>
#include <string>

#include "kiln/evaluator/eval_state.h"
#include "kiln/evaluator/output.h"

namespace kiln::eval::testing {

inline std::string evalStrict(EvalState& st, const std::string& expr) {
  std::string out;
  runWithLargeStack([&] {
    Value v;
    st.eval(st.parseExprFromString(expr, "/tmp"), v);
    st.forceValueDeep(v);
    std::ostringstream s;
    printValue(st, s, v);
    out = s.str();
  });
  return out;
}

inline std::string evalStrict(const std::string& expr) {
  EvalState st;
  return evalStrict(st, expr);
}

/// The message of the EvalError that evaluating `expr` throws ("" if none).
inline std::string evalError(const std::string& expr, EvalSettings settings = {}) {
  EvalState st(settings);
  try {
    evalStrict(st, expr);
  } catch (const EvalError& e) {
    return e.what();
  }
  return "";
}

}  // namespace kiln::eval::testing
