// Type predicates and typeOf.
#include "builtins.h"

namespace kiln::eval {

namespace {

void primTypeOf(EvalState& st, PosIdx pos, Value** args, Value& v) {
  st.forceValue(*args[0], pos);
  st.mkString(v, typeOfName(*args[0]));
}

template <VType T>
void primIs(EvalState& st, PosIdx pos, Value** args, Value& v) {
  st.forceValue(*args[0], pos);
  v.mkBool(args[0]->type == T);
}

void primIsFunction(EvalState& st, PosIdx pos, Value** args, Value& v) {
  st.forceValue(*args[0], pos);
  v.mkBool(args[0]->isFunction());
}

constexpr BuiltinDef kDefs[] = {
    {"__typeOf", 1, primTypeOf},
    {"isNull", 1, primIs<VType::kNull>},
    {"__isFunction", 1, primIsFunction},
    {"__isInt", 1, primIs<VType::kInt>},
    {"__isFloat", 1, primIs<VType::kFloat>},
    {"__isString", 1, primIs<VType::kString>},
    {"__isBool", 1, primIs<VType::kBool>},
    {"__isPath", 1, primIs<VType::kPath>},
    {"__isAttrs", 1, primIs<VType::kAttrs>},
    {"__isList", 1, primIs<VType::kList>},
};

}  // namespace

void registerTypesBuiltins(EvalState& state) { addBuiltins(state, kDefs); }

}  // namespace kiln::eval
