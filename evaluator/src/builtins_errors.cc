// Errors and evaluation control: throw, abort, tryEval, addErrorContext,
// seq, deepSeq, trace.
#include <iostream>

#include "builtins.h"

namespace kiln::eval {

namespace {

void primThrow(EvalState& st, PosIdx pos, Value** args, Value&) {
  Context ctx;
  std::string msg = coerceToString(st, pos, *args[0], ctx);
  throw ThrownError(msg);
}

void primAbort(EvalState& st, PosIdx pos, Value** args, Value&) {
  Context ctx;
  std::string msg = coerceToString(st, pos, *args[0], ctx);
  throw AbortError("evaluation aborted with the following error message: '" + msg + "'");
}

void primTryEval(EvalState& st, PosIdx pos, Value** args, Value& v) {
  Bindings* b = st.heap().allocBindings(2);
  try {
    st.forceValue(*args[0], pos);
    b->push(st.sValue, args[0]);
    b->push(st.sSuccess, &st.vTrue);
  } catch (AssertionError&) {
    b->push(st.sValue, &st.vFalse);
    b->push(st.sSuccess, &st.vFalse);
  }
  st.mkAttrs(v, b);
}

void primAddErrorContext(EvalState& st, PosIdx pos, Value** args, Value& v) {
  try {
    st.forceValue(*args[1], pos);
    v = *args[1];
  } catch (EvalError& e) {
    Context ctx;
    e.addTrace(coerceToString(st, pos, *args[0], ctx));
    throw;
  }
}

void primSeq(EvalState& st, PosIdx pos, Value** args, Value& v) {
  st.forceValue(*args[0], pos);
  st.forceValue(*args[1], pos);
  v = *args[1];
}

void primDeepSeq(EvalState& st, PosIdx pos, Value** args, Value& v) {
  st.forceValueDeep(*args[0]);
  st.forceValue(*args[1], pos);
  v = *args[1];
}

void primTrace(EvalState& st, PosIdx pos, Value** args, Value& v) {
  st.forceValue(*args[0], pos);
  if (args[0]->type == VType::kString) {
    std::cerr << "trace: " << args[0]->str.s << "\n";
  } else {
    std::cerr << "trace: ";
    printValue(st, std::cerr, *args[0]);
    std::cerr << "\n";
  }
  st.forceValue(*args[1], pos);
  v = *args[1];
}

constexpr BuiltinDef kDefs[] = {
    {"throw", 1, primThrow},
    {"abort", 1, primAbort},
    {"__tryEval", 1, primTryEval},
    {"__addErrorContext", 2, primAddErrorContext},
    {"__seq", 2, primSeq},
    {"__deepSeq", 2, primDeepSeq},
    {"__trace", 2, primTrace},
};

}  // namespace

void registerErrorsBuiltins(EvalState& state) { addBuiltins(state, kDefs); }

}  // namespace kiln::eval
