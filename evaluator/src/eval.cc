// Evaluation of each kind of expression.
#include <alloca.h>

#include <sstream>

#include "eval_services.h"
#include "eval_parts.h"
#include "kiln/evaluator/eval_state.h"
#include "print.h"
#include "scratch_string.h"

namespace kiln::eval {

Value* Expr::maybeThunk(EvalState& state, Env& env) {
  Value* v = state.heap().allocValue();
  v->mkThunk(&env, this);
  return v;
}

static inline Env* envAt(Env* e, uint32_t level) {
  while (level--) e = e->up;
  return e;
}

static Value* lookupVar(EvalState& state, Env& env, const ExprVar& var, bool noEval) {
  Env* e = envAt(&env, var.level);
  if (!var.fromWith()) return e->values[var.displ];
  while (true) {
    // Threads may meet the same `with` env: its type is read and set
    // atomically (both set the same value after forcing the same set).
    WithInfo& info = withInfo(*e);
    if (__atomic_load_n(&info.type, __ATOMIC_ACQUIRE) == WithInfo::kHasWithExpr) {
      if (noEval) return nullptr;
      forceAttrs(state, *e->values[0], var.pos);
      __atomic_store_n(&info.type, WithInfo::kHasWithAttrs, __ATOMIC_RELEASE);
    }
    if (Value* r = e->values[0]->attrs->get(var.name)) return r;
    if (!info.prevWith)
      throwError(state, var.pos, "undefined variable '" + std::string(state.symbols.name(var.name)) + "'");
    e = envAt(e, info.prevWith);
  }
}

void ExprVar::eval(EvalState& state, Env& env, Value& v) {
  Value* v2 = lookupVar(state, env, *this, false);
  state.forceValue(*v2, pos);
  v = *v2;
}

Value* ExprVar::maybeThunk(EvalState& state, Env& env) {
  // A slot of a rec set or let that is not filled yet yields nullptr.
  if (Value* v = lookupVar(state, env, *this, true)) return v;
  return Expr::maybeThunk(state, env);
}

static Symbol getName(const AttrName& n, EvalState& state, Env& env) {
  if (n.symbol) return n.symbol;
  Value v;
  n.expr->eval(state, env, v);
  return state.sym(forceStringNoCtx(state, v, n.expr->pos));
}

// The attribute `name` of `set` (forced), or an error at `pos`.
[[gnu::always_inline]] static inline Value* attrOrThrow(EvalState& state,
                                                        Value& set, Symbol name,
                                                        PosIdx pos) {
  forceAttrs(state, set, pos);
  const Attr* j = set.attrs->find(name);
  if (!j)
    throwError(
        state, pos,
        "attribute '" + std::string(state.symbols.name(name)) + "' missing");
  return j->value;
}

void ExprSelect::eval(EvalState& state, Env& env, Value& v) {
  Value vTmp;
  Value* vAttrs = &vTmp;
  e->eval(state, env, vTmp);
  if (pathBits == 1) {  // one name, no default: most selects
    vAttrs = attrOrThrow(state, vTmp, getName(path()[0], state, env), pos);
  } else {
    Expr* def = orDefault();
    for (auto& n : path()) {
      Symbol name = getName(n, state, env);
      if (!def) {
        vAttrs = attrOrThrow(state, *vAttrs, name, pos);
        continue;
      }
      state.forceValue(*vAttrs, pos);
      const Attr* j;
      if (vAttrs->type != VType::kAttrs || !(j = vAttrs->attrs->find(name))) {
        def->eval(state, env, v);
        return;
      }
      vAttrs = j->value;
    }
  }
  state.forceValue(*vAttrs, pos);
  v = *vAttrs;
}

void ExprSelectVar::eval(EvalState& state, Env& env, Value& v) {
  Value* base = lookupVar(state, env, *this, false);
  state.forceValue(*base, pos);
  Value* r = attrOrThrow(state, *base, attr, pos);
  state.forceValue(*r, pos);
  v = *r;
}

void ExprOpHasAttr::eval(EvalState& state, Env& env, Value& v) {
  Value vTmp;
  Value* vAttrs = &vTmp;
  e->eval(state, env, vTmp);
  for (auto& n : path()) {
    state.forceValue(*vAttrs, pos);
    Symbol name = getName(n, state, env);
    const Attr* j;
    if (vAttrs->type != VType::kAttrs || !(j = vAttrs->attrs->find(name))) {
      v.mkBool(false);
      return;
    }
    vAttrs = j->value;
  }
  v.mkBool(true);
}

static void insertSorted(Bindings* b, Symbol name, Value* v, PosIdx pos) {
  uint32_t i = b->size;
  while (i > 0 && name < b->own[i - 1].name) {
    b->own[i] = b->own[i - 1];
    --i;
  }
  b->own[i] = Attr{name, pos, v};
  b->size++;
}

// A rec set's `__overrides`: its attributes replace (or join) the set's,
// in the set and in the slots its own attributes see. Returns a new set.
static Bindings* applyOverrides(EvalState& state, const ExprAttrs& e, Env& env2, Bindings* b) {
  Value* vo = b->get(state.sOverrides);
  forceAttrs(state, *vo, e.pos);
  Bindings* nb = state.heap().allocBindings(b->size + vo->attrs->size + e.dynamicAttrs.size());
  for (auto& a : *b) nb->push(a.name, a.value, a.pos);
  for (auto& o : *vo->attrs) {
    bool found = false;
    for (uint32_t i = 0; i < e.attrs.size(); ++i)
      if (e.attrs[i].name == o.name) env2.values[i] = o.value;
    for (Attr* a = nb->ownBegin(); a != nb->ownEnd(); ++a)
      if (a->name == o.name) {
        a->value = o.value;
        found = true;
      }
    if (!found) nb->push(o.name, o.value, o.pos);
  }
  nb->sort();
  return nb;
}

namespace {

// The expression of a thunk whose set ExprAttrs::maybeThunk has already
// made (builtAtOnce): the thunk's environment field holds the set.
struct ExprBuiltSet final : Expr {
  void eval(EvalState&, Env& env, Value& v) override {
    v.mkAttrs(reinterpret_cast<Bindings*>(&env));
  }
  void bindVars(EvalState&, const StaticEnv&) override {}
  void show(const SymbolTable&, std::ostream&) const override {}
};
ExprBuiltSet builtSet;

}  // namespace

Value* ExprAttrs::maybeThunk(EvalState& state, Env& env) {
  if (emptyLiteral()) return &state.vEmptyAttrs;
  if (!builtAtOnce) return Expr::maybeThunk(state, env);
  // Values that are constants or variables already made; a variable of a
  // let or rec set not filled yet gets a thunk of its own (ExprVar).
  Bindings* b = state.heap().allocBindings(attrs.size());
  for (auto& a : attrs) b->push(a.name, a.e->maybeThunk(state, env), a.pos);
  Value* v = state.heap().allocValue();
  v->mkThunk(reinterpret_cast<Env*>(b), &builtSet);
  return v;
}

void ExprAttrs::eval(EvalState& state, Env& env, Value& v) {
  if (emptyLiteral()) {  // the shared empty set, as Nix's mkAttrs
    v.mkAttrs(state.vEmptyAttrs.attrs);
    return;
  }
  Bindings* b = state.heap().allocBindings(attrs.size() + dynamicAttrs.size());
  Env* dynEnv = &env;
  if (recursive) {
    Env& env2 = state.heap().allocEnv(attrs.size());
    env2.up = &env;
    dynEnv = &env2;
    bool hasOverrides = false;
    for (auto& a : attrs) hasOverrides |= a.name == state.sOverrides;
    for (uint32_t i = 0; i < attrs.size(); ++i) {
      auto& a = attrs[i];
      Value* va;
      if (hasOverrides && !a.inherited) {
        // A thunk even for `x = a;`: it must see `a` after __overrides
        // replaced its slot (as in Nix), whichever comes first.
        va = state.heap().allocValue();
        va->mkThunk(&env2, a.e);
      } else {
        va = a.e->maybeThunk(state, a.inherited ? env : env2);
      }
      env2.values[i] = va;
      b->push(a.name, va, a.pos);
    }
    if (hasOverrides) b = applyOverrides(state, *this, env2, b);
  } else {
    for (auto& a : attrs) b->push(a.name, a.e->maybeThunk(state, env), a.pos);
  }
  // No sort: bindVars put `attrs` in symbol order.
  for (auto& d : dynamicAttrs) {
    Value nameVal;
    d.nameExpr->eval(state, *dynEnv, nameVal);
    state.forceValue(nameVal, d.pos);
    if (nameVal.type == VType::kNull) continue;
    Symbol name = state.sym(forceStringNoCtx(state, nameVal, d.pos));
    if (const Attr* prev = b->find(name))
      throwError(state, d.pos, "dynamic attribute '" + std::string(state.symbols.name(name)) +
                                  "' already defined at " + state.positions.show(prev->pos));
    insertSorted(b, name, d.valueExpr->maybeThunk(state, *dynEnv), d.pos);
  }
  v.mkAttrs(b);
}

void ExprList::eval(EvalState& state, Env& env, Value& v) {
  state.mkList(v, nElems);
  std::span<Expr*> items = elems();
  for (size_t i = 0; i < nElems; ++i)
    v.list.elems[i] = items[i]->maybeThunk(state, env);
}

Value* ExprConstList::makeShared(EvalState& state) {
  // Threads may race to make it: one value wins, the others' stay unused.
  Value* made = state.arena.make<Value>();
  made->mkList(size, elems());
  Value* expected = nullptr;
  if (__atomic_compare_exchange_n(&shared, &expected, made, false, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE))
    return made;
  return expected;
}

void ExprLambda::eval(EvalState&, Env& env, Value& v) { v.mkLambda(&env, this); }

Value* ExprLambda::maybeThunk(EvalState& state, Env& env) {
  if (!loneThunk) return Expr::maybeThunk(state, env);
  Value* v = state.heap().allocLoneValue();
  v->mkThunk(&env, this);
  return v;
}

// The arguments of `fun` that are lists a builtin forces (PrimOp::
// forcedLists), bit i for the next call's argument i; 0 for a function.
static uint32_t forcedListArgs(const Value& fun) {
  if (fun.type != VType::kPrimOp && fun.type != VType::kPrimOpApp) return 0;
  size_t applied = 0;
  const Value* f = &fun;
  for (; f->type == VType::kPrimOpApp; f = f->primOpApp.left) ++applied;
  return applied < 32 ? f->primOp->forcedLists >> applied : 0;
}

void ExprCall::eval(EvalState& state, Env& env, Value& v) {
  Value vFun;
  fun->eval(state, env, vFun);
  size_t n = nArgs;
  Value** vArgs = static_cast<Value**>(alloca(sizeof(Value*) * n));
  // A constant list literal a builtin forces is passed as its shared value:
  // its thunk would be forced at once and be garbage after (a
  // replaceStrings table rebuilt on every call).
  const uint32_t forced = forcedListArgs(vFun);
  Expr** items = argItems();
  for (size_t i = 0; i < n; ++i) {
    const bool list = i < 32 && ((forced >> i) & 1);
    auto* l = list ? exprAs<ExprConstList>(items[i]) : nullptr;
    vArgs[i] = l ? l->sharedValue(state) : items[i]->maybeThunk(state, env);
  }
  callFunction(state, vFun, n, vArgs, v, pos);
}

void ExprLet::eval(EvalState& state, Env& env, Value& v) {
  Env& env2 = state.heap().allocEnv(attrs->attrs.size());
  env2.up = &env;
  for (uint32_t i = 0; i < attrs->attrs.size(); ++i) {
    auto& a = attrs->attrs[i];
    env2.values[i] = a.e->maybeThunk(state, a.inherited ? env : env2);
  }
  body->eval(state, env2, v);
}

void ExprWith::eval(EvalState& state, Env& env, Value& v) {
  Env& env2 = state.heap().allocEnv(2);  // the set's thunk, then its WithInfo
  env2.up = &env;
  WithInfo& info = *new (&env2.values[1]) WithInfo();
  info.prevWith = static_cast<uint16_t>(prevWith);
  info.type = WithInfo::kHasWithExpr;
  env2.values[0] = attrs->maybeThunk(state, env);
  body->eval(state, env2, v);
}

void ExprIf::eval(EvalState& state, Env& env, Value& v) {
  (evalBool(state, env, cond, pos) ? then : else_)->eval(state, env, v);
}

void ExprAssert::eval(EvalState& state, Env& env, Value& v) {
  if (!evalBool(state, env, cond, pos)) {
    std::ostringstream s;
    cond->show(state.symbols, s);
    throw AssertionError("assertion '" + s.str() + "' failed" + state.positions.snippet(pos));
  }
  body->eval(state, env, v);
}

void ExprOpNot::eval(EvalState& state, Env& env, Value& v) {
  v.mkBool(!evalBool(state, env, e, pos));
}

static void updateAttrs(EvalState& state, Value& v1, Value& v2, Value& v, PosIdx pos) {
  forceAttrs(state, v1, pos);
  forceAttrs(state, v2, pos);
  if (v1.attrs->size == 0) {
    v = v2;
    return;
  }
  if (v2.attrs->size == 0) {
    v = v1;
    return;
  }
  v.mkAttrs(updateBindings(state, *v1.attrs, *v2.attrs));
}

void concatLists(EvalState& state, Value& v, size_t n, Value** lists, PosIdx pos) {
  size_t len = 0;
  Value* nonEmpty = nullptr;
  for (size_t i = 0; i < n; ++i) {
    forceList(state, *lists[i], pos);
    len += lists[i]->list.size;
    if (lists[i]->list.size) nonEmpty = lists[i];
  }
  if (nonEmpty && len == nonEmpty->list.size) {
    v = *nonEmpty;
    return;
  }
  state.mkList(v, len);
  size_t k = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < lists[i]->list.size; ++j) v.list.elems[k++] = lists[i]->list.elems[j];
}

void ExprBinOp::eval(EvalState& state, Env& env, Value& v) {
  switch (op) {
    case kEq:
    case kNEq: {
      Value a, b;
      e1->eval(state, env, a);
      e2->eval(state, env, b);
      bool eq = eqValues(state, a, b);
      v.mkBool(op == kEq ? eq : !eq);
      return;
    }
    case kAnd:
      v.mkBool(evalBool(state, env, e1, pos) && evalBool(state, env, e2, pos));
      return;
    case kOr:
      v.mkBool(evalBool(state, env, e1, pos) || evalBool(state, env, e2, pos));
      return;
    case kImpl:
      v.mkBool(!evalBool(state, env, e1, pos) || evalBool(state, env, e2, pos));
      return;
    case kUpdate: {
      Value a, b;
      e1->eval(state, env, a);
      e2->eval(state, env, b);
      updateAttrs(state, a, b, v, pos);
      return;
    }
    case kConcatLists: {
      Value a, b;
      e1->eval(state, env, a);
      e2->eval(state, env, b);
      Value* ls[2] = {&a, &b};
      concatLists(state, v, 2, ls, pos);
      return;
    }
  }
}

namespace {

// The string a part of a concatenation stands for without being copied:
// a string, or a set's string `outPath` (a derivation); nullptr otherwise.
const Value* stringLike(EvalState& state, Value& v, PosIdx pos) {
  state.forceValue(v, pos);
  if (v.type == VType::kString) return &v;
  if (v.type != VType::kAttrs || v.attrs->get(state.sToString)) return nullptr;
  Value* o = v.attrs->get(state.sOutPath);
  if (!o) return nullptr;
  state.forceValue(*o, pos);
  return o->type == VType::kString ? o : nullptr;
}

// Concatenation from part `next` (already evaluated: `nextValue`) on, as
// Nix does it: `first` is true while no part was consumed in a `+` (whose
// first part's type decides between adding numbers, making a path or a
// string); each part is coerced (or added) before the next is evaluated.
// `s` and `ctx` hold what the parts before `next` gave.
void concatSlow(EvalState& state, Env& env, Value& v,
                const ExprConcatStrings& e, size_t next, const Value& nextValue,
                std::string& s, ContextUnion& ctx, bool first,
                VType firstType) {
  int64_t n = 0;
  double nf = 0;
  for (size_t i = next; i < e.parts.size(); ++i) {
    const StringPart& part = e.parts[i];
    PosIdx ipos = part.pos;
    Value tmp = nextValue;
    if (i != next) {
      if (part.literal) tmp.mkString(part.text, part.literalText().size(), nullptr);
      else part.expr->eval(state, env, tmp);
    }
    if (first) firstType = tmp.type;
    if (firstType == VType::kInt) {
      if (tmp.type == VType::kInt) {
        if (__builtin_add_overflow(n, tmp.integer, &n))
          throwError(state, ipos, "integer overflow in adding");
      } else if (tmp.type == VType::kFloat) {
        firstType = VType::kFloat;
        nf = static_cast<double>(n) + tmp.fpoint;
      } else {
        throwError(state, ipos, std::string("cannot add ") + showType(tmp) + " to an integer");
      }
    } else if (firstType == VType::kFloat) {
      if (tmp.type == VType::kInt) nf += tmp.integer;
      else if (tmp.type == VType::kFloat) nf += tmp.fpoint;
      else throwError(state, ipos, std::string("cannot add ") + showType(tmp) + " to a float");
    } else {
      appendCoerced(state, ipos, tmp, s, ctx, false, firstType == VType::kString, !first);
    }
    first = false;
  }
  if (firstType == VType::kInt) {
    v.mkInt(n);
  } else if (firstType == VType::kFloat) {
    v.mkFloat(nf);
  } else if (firstType == VType::kPath) {
    if (!ctx.empty())
      throwError(state, 
          e.pos,
          "a string that refers to a store path cannot be appended to a path");
    state.mkPath(v, canonPath(s));
  } else {
    v.mkString(state.heap().copyString(s), s.size(), ctx.result(state));
  }
}

}  // namespace

// While every part is string-like (the usual case: interpolation, `a + "x"`
// with strings), the parts are only looked at, and the result is written
// once, straight into a new (collectable) string: no intermediate buffer,
// which in a loop (`acc + "x"`) would copy the growing string twice per
// step. The parts' views stay on this stack, which the collector scans.
void ExprConcatStrings::eval(EvalState& state, Env& env, Value& v) {
  size_t count = parts.size();
  auto* views =
      static_cast<std::string_view*>(alloca(sizeof(std::string_view) * count));
  ContextUnion ctx;
  size_t total = 0;
  VType type0 = VType::kString;  // of the first part, for `+`
  for (size_t i = 0; i < count; ++i) {
    const StringPart& part = parts[i];
    if (part.literal) {  // a string without context
      views[i] = part.literalText();
      total += views[i].size();
      continue;
    }
    Value tmp;
    part.expr->eval(state, env, tmp);
    const Value* str = stringLike(state, tmp, part.pos);
    if (!str) {
      // Not string-like: what was seen so far goes into a buffer, and the
      // general path goes on from this part (not evaluated again).
      ScratchString scratch;
      std::string& s = scratch.str();
      for (size_t j = 0; j < i; ++j) s += views[j];
      bool first = !forceString && i == 0;
      return concatSlow(state, env, v, *this, i, tmp, s, ctx, first,
                        forceString ? VType::kString : type0);
    }
    if (i == 0) type0 = tmp.type;
    views[i] = str->sv();
    // `"${x}"` of a string, or of a set's string outPath (`"${drv}"`): that
    // string itself, text and context, not a copy (strings never change;
    // Nix copies them). gen-strings keeps one per dependency
    // (`path = "${d}"`).
    if (count == 1 && forceString) {
      v.mkString(str->str.s, views[0].size(), str->str.context);
      return;
    }
    total += views[i].size();
    ctx.add(str->str.context);
  }
  char* out = state.heap().allocString(total);
  for (size_t i = 0; i < count; ++i) {
    std::memcpy(out, views[i].data(), views[i].size());
    out += views[i].size();
  }
  *out = 0;
  v.mkString(out - total, total, ctx.result(state));
}

void ExprPos::eval(EvalState& state, Env&, Value& v) { mkPos(state, v, pos); }

}  // namespace kiln::eval
