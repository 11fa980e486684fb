// Attribute paths and derivation discovery for nix-instantiate-style CLIs.
#include "gc_support.h"
#include "eval_parts.h"
#include "eval_services.h"
#include "kiln/evaluator/attr_path.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

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
    Value* called = st.heap().allocValue();
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

namespace {

// Whether nix-instantiate visits an attribute of this name: it skips those
// not matching [A-Za-z_][A-Za-z0-9-_+]* ("1a", "a.b").
bool plainAttrName(std::string_view n) {
  auto alpha = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  if (n.empty() || !alpha(n[0])) return false;
  for (char c : n)
    if (!alpha(c) && !(c >= '0' && c <= '9') && c != '-' && c != '+')
      return false;
  return true;
}

// Walks values as nix-instantiate does. In `top` mode (the selected value,
// list elements and sets recursed into) the value is auto-called, a set is
// entered and anything other than a derivation, set or list is an error;
// an attribute (`top` false) is not called: a derivation is taken, a set
// entered only with recurseForDerivations, anything else skipped. Each
// derivation value is reported once, as "<drvPath>" or
// "<drvPath>!<outputName>" when its output is not "out". `found` holds
// each derivation's set once, in the order met (scanned: it keeps the sets,
// and through them the strings reported, alive; a seen set must not be
// reused either), `index` finds them by address: 8 + ~8 bytes a derivation
// where a node set and a vector of views took ~60.
struct Collector {
  EvalState& st;
  Bindings* autoArgs;
  TracedHeapVector<const Bindings*> found;
  std::vector<uint32_t> index;  // open addressing: position in `found` + 1; 0 empty

  // Adds `b` unless there; whether it was added.
  bool add(const Bindings* b) {
    if ((found.size() + 1) * 2 > index.size()) {
      index.assign(std::max<size_t>(64, index.size() * 2), 0);
      for (uint32_t i = 0; i < found.size(); ++i) *slot(found[i]) = i + 1;
    }
    uint32_t* s = slot(b);
    if (*s) return false;
    found.push_back(b);
    *s = static_cast<uint32_t>(found.size());
    return true;
  }
  // The slot holding `b`, or the empty one where it goes.
  uint32_t* slot(const Bindings* b) {
    size_t mask = index.size() - 1;
    size_t i = (reinterpret_cast<uintptr_t>(b) >> 3) * 0x9E3779B97F4A7C15ULL >> 20 & mask;
    while (index[i] && found[index[i] - 1] != b) i = (i + 1) & mask;
    return &index[i];
  }

  // Forces the drvPath and outputName during the walk (their errors are
  // the walk's); report reads them again.
  void derivation(Value& v) {
    if (!add(v.attrs)) return;
    Value* dp = v.attrs->get(st.sDrvPath);
    if (!dp) throw EvalError("derivation has no 'drvPath' attribute");
    forceString(st, *dp, kNoPos);
    if (Value* on = v.attrs->get(st.sOutputName)) forceStringNoCtx(st, *on, kNoPos);
  }

  // Calls `f` for each derivation found, with views of its strings.
  void report(const std::function<void(std::string_view, std::string_view)>& f) {
    for (const Bindings* b : found) {
      std::string_view output;
      if (Value* on = b->get(st.sOutputName)) output = on->sv();
      f(b->get(st.sDrvPath)->sv(), output == "out" ? std::string_view() : output);
    }
  }

  void collect(Value& v0, bool top) {
    if (!top) {
      // An attribute is not called (a function with required arguments is
      // skipped, as by Nix); a set it recurses into is walked like the
      // selected value (called if it has a __functor).
      st.forceValue(v0, kNoPos);
      if (isDerivation(st, v0)) return derivation(v0);
      if (v0.type != VType::kAttrs) return;
      Value* r = v0.attrs->get(st.sRecurseForDerivations);
      if (r && forceBool(st, *r, kNoPos)) collect(v0, true);
      return;
    }
    Value v;
    st.autoCallFunction(autoArgs, v0, v);
    st.forceValue(v, kNoPos);
    if (isDerivation(st, v)) return derivation(v);
    if (v.type == VType::kAttrs) {
      for (const Attr* a : sortedByName(st, v.attrs)) {
        if (!plainAttrName(st.symbols.name(a->name))) continue;
        try {
          collect(*a->value, false);
        } catch (EvalError& e) {
          e.addTrace("while evaluating the attribute '" + std::string(st.symbols.name(a->name)) + "'");
          throw;
        }
      }
    } else if (v.type == VType::kList) {
      for (size_t i = 0; i < v.list.size; ++i) collect(*v.list.elems[i], true);
    } else {
      throw EvalError("expression does not evaluate to a derivation (or a set or list of those)");
    }
  }
};

}  // namespace

void forEachDerivation(EvalState& st, Value& v, Bindings* autoArgs,
                       const std::function<void(std::string_view drvPath, std::string_view output)>& found) {
  Collector c{st, autoArgs, {}, {}};
  c.collect(v, true);
  c.report(found);
}

std::vector<CollectedDrv> collectDerivations(EvalState& st, Value& v, Bindings* autoArgs) {
  std::vector<CollectedDrv> out;
  forEachDerivation(st, v, autoArgs, [&](std::string_view drvPath, std::string_view output) {
    out.push_back(CollectedDrv{std::string(drvPath), std::string(output)});
  });
  return out;
}

}  // namespace kiln::eval
