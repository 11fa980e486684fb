// Arithmetic, bit operations and comparison builtins.
#include <cmath>
#include <functional>

#include "builtins.h"

namespace kiln::eval {

namespace {

bool eitherFloat(EvalState& st, Value** args, PosIdx pos) {
  st.forceValue(*args[0], pos);
  st.forceValue(*args[1], pos);
  return args[0]->type == VType::kFloat || args[1]->type == VType::kFloat;
}

// +, - and *: floats if either side is a float, else checked integers.
template <class FloatOp, bool (*IntOp)(int64_t, int64_t, int64_t*)>
void arith(EvalState& st, PosIdx pos, Value** args, Value& v, const char* what) {
  if (eitherFloat(st, args, pos)) {
    v.mkFloat(FloatOp()(forceFloat(st, *args[0], pos), forceFloat(st, *args[1], pos)));
    return;
  }
  int64_t r;
  if (IntOp(forceInt(st, *args[0], pos), forceInt(st, *args[1], pos), &r))
    throwError(st, pos, std::string("integer overflow in ") + what);
  v.mkInt(r);
}

bool addOverflow(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool subOverflow(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool mulOverflow(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

void primAdd(EvalState& st, PosIdx pos, Value** args, Value& v) {
  arith<std::plus<double>, addOverflow>(st, pos, args, v, "adding");
}
void primSub(EvalState& st, PosIdx pos, Value** args, Value& v) {
  arith<std::minus<double>, subOverflow>(st, pos, args, v, "subtracting");
}
void primMul(EvalState& st, PosIdx pos, Value** args, Value& v) {
  arith<std::multiplies<double>, mulOverflow>(st, pos, args, v, "multiplying");
}

void primDiv(EvalState& st, PosIdx pos, Value** args, Value& v) {
  bool fl = eitherFloat(st, args, pos);
  double d = forceFloat(st, *args[1], pos);
  if (d == 0) throwError(st, pos, "division by zero");
  if (fl) {
    v.mkFloat(forceFloat(st, *args[0], pos) / d);
    return;
  }
  int64_t a = forceInt(st, *args[0], pos), b = forceInt(st, *args[1], pos);
  if (a == INT64_MIN && b == -1) throwError(st, pos, "overflow in integer division");
  v.mkInt(a / b);
}

void primBitAnd(EvalState& st, PosIdx pos, Value** args, Value& v) {
  v.mkInt(forceInt(st, *args[0], pos) & forceInt(st, *args[1], pos));
}
void primBitOr(EvalState& st, PosIdx pos, Value** args, Value& v) {
  v.mkInt(forceInt(st, *args[0], pos) | forceInt(st, *args[1], pos));
}
void primBitXor(EvalState& st, PosIdx pos, Value** args, Value& v) {
  v.mkInt(forceInt(st, *args[0], pos) ^ forceInt(st, *args[1], pos));
}

void primLessThan(EvalState& st, PosIdx pos, Value** args, Value& v) {
  v.mkBool(lessThan(st, *args[0], *args[1], pos));
}

void primCeil(EvalState& st, PosIdx pos, Value** args, Value& v) {
  v.mkInt(static_cast<int64_t>(std::ceil(forceFloat(st, *args[0], pos))));
}
void primFloor(EvalState& st, PosIdx pos, Value** args, Value& v) {
  v.mkInt(static_cast<int64_t>(std::floor(forceFloat(st, *args[0], pos))));
}

constexpr BuiltinDef kDefs[] = {
    {"__add", 2, primAdd},       {"__sub", 2, primSub},           {"__mul", 2, primMul},
    {"__div", 2, primDiv},       {"__bitAnd", 2, primBitAnd},     {"__bitOr", 2, primBitOr},
    {"__bitXor", 2, primBitXor}, {"__lessThan", 2, primLessThan}, {"__ceil", 1, primCeil},
    {"__floor", 1, primFloor},
};

}  // namespace

void registerArithBuiltins(EvalState& state) { addBuiltins(state, kDefs); }

}  // namespace kiln::eval
