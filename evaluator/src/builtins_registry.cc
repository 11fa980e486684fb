// The base environment's constants and every builtin family (`derivation`
// is in the derivation family, beside derivationStrict); BuiltinTable
// (builtin_table.cc) makes `builtins` and the environment from them.
#include <ctime>

#include "builtins.h"

namespace kiln::eval {

void EvalState::createBaseEnv() {
  auto constant = [&](const char* name, auto init) {
    Value* v = heap().allocValue();
    init(*v);
    builtins().addConstant(name, v);
  };
  constant("true", [](Value& v) { v.mkBool(true); });
  constant("false", [](Value& v) { v.mkBool(false); });
  constant("null", [](Value& v) { v.mkNull(); });
  if (!settings.pureEval) {  // pure evaluation does not define them (as Nix)
    constant("__currentTime", [&](Value& v) {
      if (!settings.refuseCurrentTime) return v.mkInt(static_cast<int64_t>(std::time(nullptr)));
      mkRefused(v, "'builtins.currentTime' is not allowed in restricted mode: it would make every "
                   "evaluation's derivations differ (pass a time as an argument instead)");
    });
    constant("__currentSystem", [&](Value& v) { mkString(v, settings.currentSystem); });
  }
  constant("__nixVersion", [&](Value& v) { mkString(v, "2.8.0"); });
  constant("__storeDir", [&](Value& v) { mkString(v, settings.storeDir); });
  constant("__langVersion", [](Value& v) { v.mkInt(6); });
  constant("__nixPath", [&](Value& v) {
    mkList(v, searchPathEntries.size());
    for (size_t i = 0; i < searchPathEntries.size(); ++i) {
      Bindings* b = heap().allocBindings(2);
      Value* path = heap().allocValue();
      mkString(*path, searchPathEntries[i].second);
      Value* prefix = heap().allocValue();
      mkString(*prefix, searchPathEntries[i].first);
      b->push(sPath, path);
      b->push(sPrefix, prefix);
      v.list.elems[i] = heap().allocValue();
      mkAttrs(*v.list.elems[i], b);
    }
  });
#define KILN_REGISTER_FAMILY(f) register##f##Builtins(*this);
  KILN_BUILTIN_FAMILIES(KILN_REGISTER_FAMILY)
#undef KILN_REGISTER_FAMILY

  builtins().finish();
}

}  // namespace kiln::eval
