// BuiltinTable: an EvalState's builtins, the `builtins` set and the base
// environment (the constants and families registered: builtins_registry.cc).
#include "builtin_table.h"

#include "eval_parts.h"

namespace kiln::eval {

namespace {

std::string_view stripUnderscores(std::string_view n) {
  return n.substr(0, 2) == "__" ? n.substr(2) : n;
}

// The builtins that force a list argument before they return (bit i:
// argument i), as Nix 2.8's do: a constant list literal passed there is
// its shared value (ExprConstList), with no thunk to allocate. Only
// arguments forced in every case are listed (not foldl's initial value).
uint32_t forcedLists(std::string_view name) {
  static constexpr std::pair<std::string_view, uint32_t> kForced[] = {
      {"map", 0b10},          {"__filter", 0b10},       {"__head", 0b1},
      {"__tail", 0b1},        {"__elemAt", 0b1},        {"__length", 0b1},
      {"__foldl'", 0b100},    {"__sort", 0b10},         {"__concatLists", 0b1},
      {"__concatMap", 0b10},  {"__partition", 0b10},    {"__groupBy", 0b10},
      {"__elem", 0b10},       {"__any", 0b10},          {"__all", 0b10},
      {"removeAttrs", 0b10},  {"__listToAttrs", 0b1},   {"__catAttrs", 0b10},
      {"__replaceStrings", 0b11}, {"__concatStringsSep", 0b10}};
  for (auto& [n, mask] : kForced)
    if (n == name) return mask;
  return 0;
}

}  // namespace

BuiltinTable::BuiltinTable(EvalState& state) : state_(state) {}
BuiltinTable::~BuiltinTable() = default;

void BuiltinTable::addPrimOp(const char* name, uint32_t arity, PrimOpFn fn) {
  auto* p = state_.arena.make<PrimOp>(PrimOp{name, arity, fn, forcedLists(name)});
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
