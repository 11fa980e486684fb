// Static scope resolution: every variable becomes (level, displacement) in
// the runtime Env chain, or a lookup through the enclosing `with` sets.
#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {

void ExprVar::bindVars(EvalState& state, const StaticEnv& env) {
  int withLevel = -1;
  uint32_t l = 0;
  for (const StaticEnv* cur = &env; cur; cur = cur->up, ++l) {
    if (cur->isWith) {
      if (withLevel == -1) withLevel = static_cast<int>(l);
    } else if (auto* v = cur->find(name)) {
      level = l;
      displ = v->second;
      return;
    }
  }
  if (withLevel == -1)
    throw ParseError("undefined variable '" + std::string(state.symbols.name(name)) + "'" +
                     state.positions.snippet(pos));
  displ = kFromWith;
  level = static_cast<uint32_t>(withLevel);
}

static void bindPath(EvalState& state, const StaticEnv& env, std::span<AttrName> path) {
  for (auto& n : path)
    if (n.expr) n.expr->bindVars(state, env);
}

void ExprSelect::bindVars(EvalState& state, const StaticEnv& env) {
  e->bindVars(state, env);
  if (Expr* def = orDefault()) def->bindVars(state, env);
  bindPath(state, env, path());
}

void ExprOpHasAttr::bindVars(EvalState& state, const StaticEnv& env) {
  e->bindVars(state, env);
  bindPath(state, env, path());
}

void ExprAttrs::bindBodies(EvalState& state, const StaticEnv& outer, const StaticEnv& inner) {
  for (auto& a : attrs) a.e->bindVars(state, a.inherited ? outer : inner);
  for (auto& d : dynamicAttrs) {
    d.nameExpr->bindVars(state, inner);
    d.valueExpr->bindVars(state, inner);
  }
}

void ExprAttrs::bindVars(EvalState& state, const StaticEnv& env) {
  // In symbol order, so that eval() makes its Bindings already sorted
  // (slots of a rec set follow this order too). Nothing observes the
  // source order of a set's attributes (--parse shows them by name).
  std::sort(attrs.begin(), attrs.end(),
            [](const AttrDef& x, const AttrDef& y) { return x.name < y.name; });
  if (recursive) {
    StaticEnv inner;
    inner.up = &env;
    for (uint32_t i = 0; i < attrs.size(); ++i) inner.vars.push_back({attrs[i].name, i});
    inner.sort();
    bindBodies(state, env, inner);
  } else {
    bindBodies(state, env, env);
  }
  builtAtOnce = !recursive && dynamicAttrs.empty() && !attrs.empty() && !capturesEnv();
}

void ExprList::bindVars(EvalState& state, const StaticEnv& env) {
  for (auto* e : elems()) e->bindVars(state, env);
}

void ExprLambda::bindVars(EvalState& state, const StaticEnv& env) {
  StaticEnv inner;
  inner.up = &env;
  uint32_t d = 0;
  if (arg) inner.vars.push_back({arg, d++});
  if (formals)
    for (auto& f : formals->formals) inner.vars.push_back({f.name, d++});
  inner.sort();
  if (formals)
    for (auto& f : formals->formals)
      if (f.def) f.def->bindVars(state, inner);
  body->bindVars(state, inner);
  stackEnvArgs = stackEnvArgsOf(*this);
}

void ExprCall::bindVars(EvalState& state, const StaticEnv& env) {
  fun->bindVars(state, env);
  for (auto* a : args()) {
    a->bindVars(state, env);
    if (auto* l = exprAs<ExprLambda>(a)) l->loneThunk = true;
  }
}

void ExprLet::bindVars(EvalState& state, const StaticEnv& env) {
  StaticEnv inner;
  inner.up = &env;
  for (uint32_t i = 0; i < attrs->attrs.size(); ++i) inner.vars.push_back({attrs->attrs[i].name, i});
  inner.sort();
  attrs->bindBodies(state, env, inner);
  body->bindVars(state, inner);
}

void ExprWith::bindVars(EvalState& state, const StaticEnv& env) {
  prevWith = 0;
  uint32_t l = 1;
  for (const StaticEnv* cur = &env; cur; cur = cur->up, ++l)
    if (cur->isWith) {
      prevWith = l;
      break;
    }
  attrs->bindVars(state, env);
  StaticEnv inner;
  inner.isWith = true;
  inner.up = &env;
  body->bindVars(state, inner);
}

void ExprIf::bindVars(EvalState& state, const StaticEnv& env) {
  cond->bindVars(state, env);
  then->bindVars(state, env);
  else_->bindVars(state, env);
}

void ExprAssert::bindVars(EvalState& state, const StaticEnv& env) {
  cond->bindVars(state, env);
  body->bindVars(state, env);
}

void ExprOpNot::bindVars(EvalState& state, const StaticEnv& env) { e->bindVars(state, env); }

void ExprBinOp::bindVars(EvalState& state, const StaticEnv& env) {
  e1->bindVars(state, env);
  e2->bindVars(state, env);
}

void ExprConcatStrings::bindVars(EvalState& state, const StaticEnv& env) {
  for (auto& p : parts)
    if (!p.literal) p.expr->bindVars(state, env);
}

}  // namespace kiln::eval
