// Attribute set builtins.
#include <algorithm>
#include <vector>

#include "gc_support.h"
#include "builtins.h"

namespace kiln::eval {

namespace {

// A string value of a name: the symbol table's own NUL-terminated text,
// in one value per symbol that every attrNames list and mapAttrs call
// shares (no copy, no value per element: attrNames made 8 % of the value
// blocks of gen-byname, through callPackage).
Value* strValue(EvalState& st, Symbol name) { return st.heap().nameValue(name, st.symbols); }

void primAttrNames(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceAttrs(st, *args[0], pos);
  auto sorted = sortedByName(st, args[0]->attrs);
  st.mkList(v, sorted.size());
  for (size_t i = 0; i < sorted.size(); ++i)
    v.list.elems[i] = strValue(st, sorted[i]->name);
}

void primAttrValues(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceAttrs(st, *args[0], pos);
  auto sorted = sortedByName(st, args[0]->attrs);
  st.mkList(v, sorted.size());
  for (size_t i = 0; i < sorted.size(); ++i) v.list.elems[i] = sorted[i]->value;
}

void primGetAttr(EvalState& st, PosIdx pos, Value** args, Value& v) {
  std::string_view name = forceStringNoCtx(st, *args[0], pos);
  forceAttrs(st, *args[1], pos);
  Value* a = args[1]->attrs->get(st.sym(name));
  if (!a) throwError(st, pos, "attribute '" + std::string(name) + "' missing");
  st.forceValue(*a, pos);
  v = *a;
}

void primUnsafeGetAttrPos(EvalState& st, PosIdx pos, Value** args, Value& v) {
  std::string_view name = forceStringNoCtx(st, *args[0], pos);
  forceAttrs(st, *args[1], pos);
  const Attr* a = args[1]->attrs->find(st.sym(name));
  if (!a) v.mkNull();
  else mkPos(st, v, a->pos);
}

void primHasAttr(EvalState& st, PosIdx pos, Value** args, Value& v) {
  std::string_view name = forceStringNoCtx(st, *args[0], pos);
  forceAttrs(st, *args[1], pos);
  v.mkBool(args[1]->attrs->find(st.sym(name)) != nullptr);
}

// removeAttrs set names: both sorted by symbol, merged in one pass.
void primRemoveAttrs(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceAttrs(st, *args[0], pos);
  forceList(st, *args[1], pos);
  std::vector<Symbol> drop;
  drop.reserve(args[1]->list.size);
  for (size_t i = 0; i < args[1]->list.size; ++i)
    drop.push_back(st.sym(forceStringNoCtx(st, *args[1]->list.elems[i], pos)));
  std::sort(drop.begin(), drop.end());
  // Counted first: a collectable set keeps the tail trimBindings cuts off,
  // and callPackage's `removeAttrs fargs (attrNames given)` is most often
  // empty (the state's empty set, as `{ }`).
  auto d = drop.begin();
  // Whether `a` stays: both walks go through the set in name order.
  auto keep = [&](const Attr& a) {
    while (d != drop.end() && *d < a.name) ++d;
    return d == drop.end() || *d != a.name;
  };
  uint32_t kept = 0;
  for (auto& a : *args[0]->attrs) kept += keep(a);
  if (kept == 0) {
    v.mkAttrs(st.vEmptyAttrs.attrs);
    return;
  }
  Bindings* b = st.heap().allocBindings(kept);
  d = drop.begin();
  for (auto& a : *args[0]->attrs)
    if (keep(a)) b->own[b->size++] = a;
  v.mkAttrs(b);
}

// listToAttrs: the first element with a name wins, as in Nix. Elements are
// pushed in list order and stably sorted, so duplicates end up next to each
// other, the first one in front.
void primListToAttrs(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceList(st, *args[0], pos);
  size_t n = args[0]->list.size;
  std::vector<Attr> attrs;
  attrs.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    Value& e = *args[0]->list.elems[i];
    forceAttrs(st, e, pos);
    const Attr* name = e.attrs->find(st.sName);
    if (!name) throwError(st, pos, "'name' attribute missing in a call to 'listToAttrs'");
    Symbol s = st.sym(forceStringNoCtx(st, *name->value, pos));
    const Attr* value = e.attrs->find(st.sValue);
    if (!value) throwError(st, pos, "'value' attribute missing in a call to 'listToAttrs'");
    attrs.push_back(Attr{s, value->pos, value->value});
  }
  std::stable_sort(attrs.begin(), attrs.end(),
                   [](const Attr& x, const Attr& y) { return x.name < y.name; });
  Bindings* b = st.heap().allocBindings(n);
  for (const Attr& a : attrs)
    if (b->size == 0 || b->own[b->size - 1].name != a.name) b->own[b->size++] = a;
  st.heap().trimBindings(b);
  v.mkAttrs(b);
}

// The attributes of `big` named in `small`, in symbol order: a binary search
// in `big` per attribute of `small`, each search starting where the last
// one ended when `big` is flat (both are sorted), so the cost is
// O(|small| log |big|). A layered `big` is searched through its layers.
template <bool kTakeFromSmall>
void intersectInto(const Bindings& small, const Bindings& big, Bindings& out) {
  if (big.layered()) {
    for (const Attr& a : small)
      if (const Attr* x = big.find(a.name)) out.own[out.size++] = kTakeFromSmall ? a : *x;
    return;
  }
  const Attr* from = big.ownBegin();
  const Attr* end = big.ownEnd();
  for (const Attr& a : small) {
    from = std::lower_bound(from, end, a.name, [](const Attr& x, Symbol n) { return x.name < n; });
    if (from == end) break;
    if (from->name == a.name) out.own[out.size++] = kTakeFromSmall ? a : *from;
  }
}

// intersectAttrs e1 e2: the attributes of e2 whose names are in e1. Costs
// O(min log max) as Nix's does (callPackage intersects a function's few
// formals with the whole package set), whichever side is the small one.
void primIntersectAttrs(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceAttrs(st, *args[0], pos);
  forceAttrs(st, *args[1], pos);
  const Bindings& names = *args[0]->attrs;
  const Bindings& values = *args[1]->attrs;
  Bindings* b = st.heap().allocBindings(std::min(names.size, values.size));
  if (names.size <= values.size) intersectInto<false>(names, values, *b);
  else intersectInto<true>(values, names, *b);
  st.heap().trimBindings(b);
  v.mkAttrs(b);
}

void primCatAttrs(EvalState& st, PosIdx pos, Value** args, Value& v) {
  Symbol name = st.sym(forceStringNoCtx(st, *args[0], pos));
  forceList(st, *args[1], pos);
  TracedVector<Value*> out;
  for (size_t i = 0; i < args[1]->list.size; ++i) {
    Value& e = *args[1]->list.elems[i];
    forceAttrs(st, e, pos);
    if (Value* a = e.attrs->get(name)) out.push_back(a);
  }
  st.mkList(v, out.size());
  std::copy(out.begin(), out.end(), v.list.elems);
}

void primFunctionArgs(EvalState& st, PosIdx pos, Value** args, Value& v) {
  st.forceValue(*args[0], pos);
  if (isDerivationBuiltin(*args[0])) {  // as Nix's `{ outputs ? [ "out" ], ... }:`
    Bindings* b = st.heap().allocBindings(1);
    b->push(st.sOutputs, &st.vTrue);
    st.mkAttrs(v, b);
    return;
  }
  if (args[0]->type == VType::kPrimOp || args[0]->type == VType::kPrimOpApp) {
    v = st.vEmptyAttrs;
    return;
  }
  if (args[0]->type != VType::kLambda) throwTypeError(st, pos, "a function", *args[0]);
  Formals* f = args[0]->lambda.fun->formals;
  if (!f) {
    v = st.vEmptyAttrs;
    return;
  }
  Bindings* b = f->argsSet.load(std::memory_order_acquire);
  if (!b) {
    // Two threads may both make it: the loser's copy is left in the arena.
    Bindings* made = st.heap().allocPermanentBindings(f->formals.size());
    for (auto& x : f->formals) made->push(x.name, x.def ? &st.vTrue : &st.vFalse, x.pos);
    b = f->argsSet.compare_exchange_strong(b, made, std::memory_order_acq_rel) ? made : b;
  }
  st.mkAttrs(v, b);
}

void primMapAttrs(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceAttrs(st, *args[1], pos);
  Bindings* b = st.heap().allocBindings(args[1]->attrs->size);
  for (auto& a : *args[1]->attrs) {
    Value* partial = st.heap().allocValue();
    partial->mkApp(args[0], strValue(st, a.name));
    Value* r = st.heap().allocValue();
    r->mkApp(partial, a.value);
    b->own[b->size++] = Attr{a.name, a.pos, r};
  }
  v.mkAttrs(b);
}

void primZipAttrsWith(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceList(st, *args[1], pos);
  TracedHeapVector<std::pair<Symbol, TracedHeapVector<Value*>>> groups;
  std::unordered_map<uint32_t, size_t> index;
  for (size_t i = 0; i < args[1]->list.size; ++i) {
    Value& e = *args[1]->list.elems[i];
    forceAttrs(st, e, pos);
    for (auto& a : *e.attrs) {
      auto it = index.find(a.name.id);
      if (it == index.end()) {
        index.emplace(a.name.id, groups.size());
        groups.push_back({a.name, {a.value}});
      } else {
        groups[it->second].second.push_back(a.value);
      }
    }
  }
  Bindings* b = st.heap().allocBindings(groups.size());
  for (auto& [name, xs] : groups) {
    Value* list = st.heap().allocValue();
    st.mkList(*list, xs.size());
    std::copy(xs.begin(), xs.end(), list->list.elems);
    Value* partial = st.heap().allocValue();
    partial->mkApp(args[0], strValue(st, name));
    Value* r = st.heap().allocValue();
    r->mkApp(partial, list);
    b->push(name, r);
  }
  st.mkAttrs(v, b);
}

constexpr BuiltinDef kDefs[] = {
    {"__attrNames", 1, primAttrNames},
    {"__attrValues", 1, primAttrValues},
    {"__getAttr", 2, primGetAttr},
    {"__unsafeGetAttrPos", 2, primUnsafeGetAttrPos},
    {"__hasAttr", 2, primHasAttr},
    {"removeAttrs", 2, primRemoveAttrs},
    {"__listToAttrs", 1, primListToAttrs},
    {"__intersectAttrs", 2, primIntersectAttrs},
    {"__catAttrs", 2, primCatAttrs},
    {"__functionArgs", 1, primFunctionArgs},
    {"__mapAttrs", 2, primMapAttrs},
    {"__zipAttrsWith", 2, primZipAttrsWith},
};

}  // namespace

void registerAttrsBuiltins(EvalState& state) { addBuiltins(state, kDefs); }

}  // namespace kiln::eval
