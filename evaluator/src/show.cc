// Expression printing for `--parse`, assertion messages and positions.
#include <algorithm>
#include <sstream>

#include "kiln/evaluator/eval_state.h"
#include "print.h"

namespace kiln::eval {

static void showAttrPath(const SymbolTable& st, std::ostream& out,
                         std::span<const AttrName> path) {
  bool first = true;
  for (auto& n : path) {
    if (!first) out << '.';
    first = false;
    if (n.symbol) {
      printAttrName(out, st.name(n.symbol));
    } else {
      out << "\"${";
      n.expr->show(st, out);
      out << "}\"";
    }
  }
}

// Bindings in source order (let) or, as Nix 2.8 shows a set, sorted by
// name with "inherit x ;".
static void showBindings(const SymbolTable& st, std::ostream& out,
                         const ArenaVec<ExprAttrs::AttrDef>& defs, bool asSet = false) {
  std::vector<const ExprAttrs::AttrDef*> attrs;
  for (auto& a : defs) attrs.push_back(&a);
  if (asSet)
    std::stable_sort(attrs.begin(), attrs.end(), [&](auto* x, auto* y) {
      return st.name(x->name) < st.name(y->name);
    });
  for (auto* ap : attrs) {
    auto& a = *ap;
    if (a.inherited) {
      out << "inherit " << st.name(a.name) << (asSet ? " ; " : "; ");
    } else {
      printAttrName(out, st.name(a.name));
      out << " = ";
      a.e->show(st, out);
      out << "; ";
    }
  }
}

// A constant's value as its literal.
static void showConstant(const Value& v, std::ostream& out) {
  switch (v.type) {
    case VType::kInt: out << v.integer; break;
    case VType::kFloat: out << showFloat(v.fpoint); break;
    case VType::kString: printString(out, v.str.s, true); break;
    case VType::kPath: out << v.path; break;
    default: out << "<const>"; break;
  }
}

void ExprConst::show(const SymbolTable&, std::ostream& out) const { showConstant(v, out); }

void ExprVar::show(const SymbolTable& st, std::ostream& out) const { out << st.name(name); }

void ExprSelect::show(const SymbolTable& st, std::ostream& out) const {
  out << "(";
  e->show(st, out);
  out << ").";
  showAttrPath(st, out, path());
  if (Expr* def = orDefault()) {
    out << " or (";
    def->show(st, out);
    out << ")";
  }
}

void ExprSelectVar::show(const SymbolTable& st, std::ostream& out) const {
  out << "(" << st.name(name) << ").";
  AttrName n{attr, nullptr};
  showAttrPath(st, out, {&n, 1});
}

void ExprOpHasAttr::show(const SymbolTable& st, std::ostream& out) const {
  out << "((";
  e->show(st, out);
  out << ") ? ";
  showAttrPath(st, out, path());
  out << ")";
}

void ExprAttrs::show(const SymbolTable& st, std::ostream& out) const {
  if (recursive) out << "rec ";
  out << "{ ";
  showBindings(st, out, attrs, true);
  for (auto& d : dynamicAttrs) {
    out << "\"${";
    d.nameExpr->show(st, out);
    out << "}\" = ";
    d.valueExpr->show(st, out);
    out << "; ";
  }
  out << "}";
}

void ExprConstList::show(const SymbolTable&, std::ostream& out) const {
  out << "[ ";
  for (size_t i = 0; i < size; ++i) {
    out << "(";
    showConstant(*elems()[i], out);
    out << ") ";
  }
  out << "]";
}

void ExprList::show(const SymbolTable& st, std::ostream& out) const {
  out << "[ ";
  for (auto* e : elems()) {
    out << "(";
    e->show(st, out);
    out << ") ";
  }
  out << "]";
}

void ExprLambda::show(const SymbolTable& st, std::ostream& out) const {
  out << "(";
  if (formals) {
    out << "{ ";
    bool first = true;
    for (auto& f : formals->formals) {
      if (!first) out << ", ";
      first = false;
      out << st.name(f.name);
      if (f.def) {
        out << " ? ";
        f.def->show(st, out);
      }
    }
    if (formals->ellipsis) out << (first ? "..." : ", ...");
    out << " }";
    if (arg) out << " @ ";
  }
  if (arg) out << st.name(arg);
  out << ": ";
  body->show(st, out);
  out << ")";
}

void ExprCall::show(const SymbolTable& st, std::ostream& out) const {
  out << "(";
  fun->show(st, out);
  for (auto* a : args()) {
    out << " ";
    a->show(st, out);
  }
  out << ")";
}

void ExprLet::show(const SymbolTable& st, std::ostream& out) const {
  out << "(let ";
  showBindings(st, out, attrs->attrs);
  out << "in ";
  body->show(st, out);
  out << ")";
}

void ExprWith::show(const SymbolTable& st, std::ostream& out) const {
  out << "(with ";
  attrs->show(st, out);
  out << "; ";
  body->show(st, out);
  out << ")";
}

void ExprIf::show(const SymbolTable& st, std::ostream& out) const {
  out << "(if ";
  cond->show(st, out);
  out << " then ";
  then->show(st, out);
  out << " else ";
  else_->show(st, out);
  out << ")";
}

void ExprAssert::show(const SymbolTable& st, std::ostream& out) const {
  out << "assert ";
  cond->show(st, out);
  out << "; ";
  body->show(st, out);
}

void ExprOpNot::show(const SymbolTable& st, std::ostream& out) const {
  out << "(! ";
  e->show(st, out);
  out << ")";
}

void ExprBinOp::show(const SymbolTable& st, std::ostream& out) const {
  static const char* names[] = {"==", "!=", "&&", "||", "->", "//", "++"};
  out << "(";
  e1->show(st, out);
  out << " " << names[op] << " ";
  e2->show(st, out);
  out << ")";
}

void ExprConcatStrings::show(const SymbolTable& st, std::ostream& out) const {
  out << "(";
  bool first = true;
  for (auto& p : parts) {
    if (!first) out << " + ";
    first = false;
    if (p.literal) printString(out, p.text, true);
    else p.expr->show(st, out);
  }
  out << ")";
}

void ExprPos::show(const SymbolTable&, std::ostream& out) const { out << "__curPos"; }

}  // namespace kiln::eval
