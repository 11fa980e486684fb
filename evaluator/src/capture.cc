// Which expressions may leave their environment referenced once evaluated
// (Expr::capturesEnv): a call of a lambda whose body and defaults capture
// nothing gets its environment on the C++ stack (ExprLambda::stackEnvArgs,
// callFunction), not from the collector: `x: x.value`, `o: o != "dev"`,
// `d: "${d}/bin"`, and `cond: x: if cond then [ x ] else [ ]` called with
// both arguments.
//
// What keeps an environment: a thunk made in it (maybeThunk of anything but
// a constant, `{ }`, a resolved variable or a set of those, which
// ExprAttrs::builtAtOnce makes at once), a closure (a lambda), an
// environment whose `up` it is (let, with, rec). Everything else evaluates
// its parts at once and keeps only their values.
#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {

static bool pathCaptures(std::span<const AttrName> path) {
  for (const AttrName& n : path)
    if (n.expr && n.expr->capturesEnv()) return true;
  return false;
}

bool ExprSelect::capturesEnv() const {
  const Expr* def = orDefault();
  return e->capturesEnv() || pathCaptures(path()) ||
         (def && def->capturesEnv());
}

bool ExprOpHasAttr::capturesEnv() const {
  return e->capturesEnv() || pathCaptures(path());
}

bool ExprAttrs::capturesEnv() const {
  if (recursive && !emptyLiteral()) return true;
  for (const AttrDef& a : attrs)
    if (a.e->thunkCapturesEnv()) return true;
  for (const DynamicAttrDef& d : dynamicAttrs)
    if (d.nameExpr->capturesEnv() || d.valueExpr->thunkCapturesEnv())
      return true;
  return false;
}

bool ExprList::capturesEnv() const {
  for (const Expr* e : elems())
    if (e->thunkCapturesEnv()) return true;
  return false;
}

bool ExprCall::capturesEnv() const {
  if (fun->capturesEnv()) return true;
  for (const Expr* a : args())
    if (a->thunkCapturesEnv()) return true;
  return false;
}

bool ExprIf::capturesEnv() const {
  return cond->capturesEnv() || then->capturesEnv() || else_->capturesEnv();
}

bool ExprAssert::capturesEnv() const {
  return cond->capturesEnv() || body->capturesEnv();
}

bool ExprOpNot::capturesEnv() const { return e->capturesEnv(); }

bool ExprBinOp::capturesEnv() const {
  return e1->capturesEnv() || e2->capturesEnv();
}

bool ExprConcatStrings::capturesEnv() const {
  for (const StringPart& p : parts)
    if (!p.literal && p.expr->capturesEnv()) return true;
  return false;
}

uint8_t stackEnvArgsOf(const ExprLambda& l) {
  if (l.envSize() > ExprLambda::kMaxStackEnv) return 0;
  // A default is made while the environment is being filled: a variable
  // naming a later formal is not there yet and gets a thunk in it.
  if (l.formals)
    for (const Formal& f : l.formals->formals)
      if (f.def &&
          (f.def->thunkCapturesEnv() || dynamic_cast<const ExprVar*>(f.def)))
        return 0;
  if (const ExprLambda* inner = exprAs<ExprLambda>(l.body))
    return inner->stackEnvArgs &&
                   inner->stackEnvArgs < ExprLambda::kMaxStackEnvs
               ? inner->stackEnvArgs + 1
               : 0;
  return l.body->capturesEnv() ? 0 : 1;
}

}  // namespace kiln::eval
