#pragma once
// Helpers for evaluator unit tests: evaluate an expression and print it the
// way `kiln instantiate --eval --strict` does.
#include <sstream>
#include <string>

#include "kiln/evaluator/eval_state.h"
#include "kiln/evaluator/output.h"

namespace kiln::eval::testing {

/// Evaluates `expr` (files relative to /tmp) and forces it deeply into `v`,
/// on a large stack.
inline void evalDeep(EvalState& st, const std::string& expr, Value& v) {
  runWithLargeStack([&] {
    st.eval(st.parseExprFromString(expr, "/tmp"), v);
    st.forceValueDeep(v);
  });
}

inline std::string evalStrict(EvalState& st, const std::string& expr) {
  Value v;
  evalDeep(st, expr, v);
  std::ostringstream s;
  printValue(st, s, v);
  return s.str();
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
