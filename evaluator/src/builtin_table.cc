// BuiltinTable: an EvalState's builtins, the `builtins` set and the base
// environment (the constants and families registered: builtins_registry.cc).
#include "builtin_table.h"

#include "eval_parts.h"

namespace kiln::eval {

namespace {

std::string_view stripUnderscores(std::string_view n) {
  return n.substr(0, 2) == "__" ? n.substr(2) : n;
}

}  // namespace

BuiltinTable::BuiltinTable(EvalState& state) : state_(state) {}
BuiltinTable::~BuiltinTable() = default;

void BuiltinTable::addPrimOp(const char* name, uint32_t arity, PrimOpFn fn) {
  auto* p = state_.arena.make<PrimOp>(PrimOp{name, arity, fn});
  Value* v = state_.heap().allocValue();
  v->mkPrimOp(p);
  addConstant(name, v);
}

void BuiltinTable::addConstant(const std::string& name, Value* v) {
  Symbol global = state_.sym(name);
  for (auto& g : globals_)
    if (g.first == global) {
      g.second = v;
      for (auto& b : builtinAttrs_)
        if (b.first == state_.sym(stripUnderscores(name))) b.second = v;
      return;
    }
  globals_.push_back({global, v});
  builtinAttrs_.push_back({state_.sym(stripUnderscores(name)), v});
}

Value* BuiltinTable::lookup(std::string_view name) {
  return vBuiltins_->attrs->get(state_.sym(name));
}

void BuiltinTable::finish() {
  // The `builtins` set holds every builtin and itself.
  EvalHeap& heap = state_.heap();
  vBuiltins_ = heap.allocValue();
  Bindings* b = heap.allocBindings(builtinAttrs_.size() + 2);
  for (auto& [name, v] : builtinAttrs_) b->push(name, v);
  b->push(state_.sym("builtins"), vBuiltins_);
  state_.mkAttrs(*vBuiltins_, b);
  globals_.push_back({state_.sym("builtins"), vBuiltins_});

  baseEnv_ = &heap.allocEnv(globals_.size());
  for (uint32_t i = 0; i < globals_.size(); ++i) {
    baseEnv_->values[i] = globals_[i].second;
    staticBaseEnv_.vars.push_back({globals_[i].first, i});
  }
  staticBaseEnv_.sort();
}

}  // namespace kiln::eval
