// Attribute paths and derivation discovery for nix-instantiate-style CLIs.
#include "kiln/evaluator/attr_path.h"

namespace kiln::eval {

static std::vector<std::string> splitAttrPath(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') quoted = !quoted;
    else if (c == '.' && !quoted) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (quoted) throw EvalError("missing closing quote in selection path '" + s + "'");
  out.push_back(cur);
  return out;
}

Value* findAlongAttrPath(EvalState& st, const std::string& path, Bindings* autoArgs, Value& root) {
  Value* v = &root;
  if (path.empty()) return v;
  for (const std::string& attr : splitAttrPath(path)) {
    Value* called = st.allocValue();
    st.autoCallFunction(autoArgs, *v, *called);
    v = called;
    st.forceValue(*v, kNoPos);
    bool numeric = !attr.empty() && attr.find_first_not_of("0123456789") == std::string::npos;
    if (!numeric) {
      if (v->type != VType::kAttrs)
        throw EvalError("the expression selected by the selection path '" + path +
                        "' should be a set but is " + showType(*v));
      if (attr.empty()) throw EvalError("empty attribute name in selection path '" + path + "'");
      Value* a = v->attrs->get(st.sym(attr));
      if (!a) throw EvalError("attribute '" + attr + "' in selection path '" + path + "' not found");
      v = a;
    } else {
      if (v->type != VType::kList)
        throw EvalError("the expression selected by the selection path '" + path +
                        "' should be a list but is " + showType(*v));
      size_t idx = std::stoul(attr);
      if (idx >= v->list.size)
        throw EvalError("list index " + attr + " in selection path '" + path + "' is out of range");
      v = v->list.elems[idx];
    }
  }
  return v;
}

static void collect(EvalState& st, Value& v0, Bindings* autoArgs, bool top,
                    std::vector<std::string>& out) {
  Value v;
  st.autoCallFunction(autoArgs, v0, v);
  st.forceValue(v, kNoPos);
  if (st.isDerivation(v)) {
    Value* dp = v.attrs->get(st.sDrvPath);
    if (!dp) throw EvalError("derivation has no 'drvPath' attribute");
    Context ctx;
    out.push_back(std::string(st.forceString(*dp, ctx, kNoPos)));
    return;
  }
  if (v.type == VType::kAttrs) {
    if (!top) {
      Value* r = v.attrs->get(st.sRecurseForDerivations);
      if (!r || !st.forceBool(*r, kNoPos)) return;
    }
    for (const Attr* a : st.sortedByName(v.attrs)) {
      try {
        collect(st, *a->value, autoArgs, false, out);
      } catch (EvalError& e) {
        e.addTrace("while evaluating the attribute '" + std::string(st.symbols.name(a->name)) + "'");
        throw;
      }
    }
  } else if (v.type == VType::kList) {
    for (size_t i = 0; i < v.list.size; ++i) collect(st, *v.list.elems[i], autoArgs, false, out);
  } else if (top) {
    throw EvalError("expression does not evaluate to a derivation (or a set or list of those)");
  }
}

std::vector<std::string> collectDerivations(EvalState& st, Value& v, Bindings* autoArgs) {
  std::vector<std::string> out;
  collect(st, v, autoArgs, true, out);
  return out;
}

}  // namespace kiln::eval
