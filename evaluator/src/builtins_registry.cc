// The base environment: constants and every builtin family (`derivation`
// is in the derivation family, beside derivationStrict).
#include <ctime>

#include "builtins.h"

namespace kiln::eval {

namespace {

std::string_view stripUnderscores(std::string_view n) {
  return n.substr(0, 2) == "__" ? n.substr(2) : n;
}

}  // namespace

void EvalState::addPrimOp(const char* name, uint32_t arity, PrimOpFn fn) {
  auto* p = arena.make<PrimOp>(PrimOp{name, arity, fn});
  Value* v = heap().allocValue();
  v->mkPrimOp(p);
  addConstant(name, v);
}

void EvalState::addConstant(const std::string& name, Value* v) {
  Symbol global = sym(name);
  for (auto& g : globals_)
    if (g.first == global) {
      g.second = v;
      for (auto& b : builtinAttrs_)
        if (b.first == sym(stripUnderscores(name))) b.second = v;
      return;
    }
  globals_.push_back({global, v});
  builtinAttrs_.push_back({sym(stripUnderscores(name)), v});
}

Value* EvalState::lookupBuiltin(std::string_view name) {
  return vBuiltins->attrs->get(sym(name));
}

void EvalState::createBaseEnv() {
  auto constant = [&](const char* name, auto init) {
    Value* v = heap().allocValue();
    init(*v);
    addConstant(name, v);
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

  // The `builtins` set holds every builtin and itself.
  vBuiltins = heap().allocValue();
  Bindings* b = heap().allocBindings(builtinAttrs_.size() + 2);
  for (auto& [name, v] : builtinAttrs_) b->push(name, v);
  b->push(sym("builtins"), vBuiltins);
  mkAttrs(*vBuiltins, b);
  globals_.push_back({sym("builtins"), vBuiltins});

  baseEnv = &heap().allocEnv(globals_.size());
  for (uint32_t i = 0; i < globals_.size(); ++i) {
    baseEnv->values[i] = globals_[i].second;
    staticBaseEnv.vars.push_back({globals_[i].first, i});
  }
  staticBaseEnv.sort();
}

}  // namespace kiln::eval
