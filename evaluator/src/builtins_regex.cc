// Regular expression builtins (POSIX extended syntax): match and split.
#include <regex>
#include <unordered_map>

#include "gc_support.h"
#include "builtins.h"

namespace kiln::eval {

namespace {

const std::regex& compile(EvalState& st, PosIdx pos, const std::string& re) {
  static thread_local std::unordered_map<std::string, std::regex> cache;
  auto it = cache.find(re);
  if (it != cache.end()) return it->second;
  try {
    return cache.emplace(re, std::regex(re, std::regex::extended)).first->second;
  } catch (const std::regex_error&) {
    throwError(st, pos, "invalid regular expression '" + re + "'");
  }
}

Value* groupValue(EvalState& st, const std::ssub_match& m) {
  Value* g = st.heap().allocValue();
  if (m.matched) st.mkString(*g, m.str());
  else g->mkNull();
  return g;
}

void primMatch(EvalState& st, PosIdx pos, Value** args, Value& v) {
  std::string re(forceStringNoCtx(st, *args[0], pos));
  const std::regex& regex = compile(st, pos, re);
  Context ctx;
  std::string s(forceString(st, *args[1], ctx, pos));
  std::smatch m;
  if (!std::regex_match(s, m, regex)) {
    v.mkNull();
    return;
  }
  size_t n = m.size() - 1;
  st.mkList(v, n);
  for (size_t i = 0; i < n; ++i) v.list.elems[i] = groupValue(st, m[i + 1]);
}

void primSplit(EvalState& st, PosIdx pos, Value** args, Value& v) {
  std::string re(forceStringNoCtx(st, *args[0], pos));
  const std::regex& regex = compile(st, pos, re);
  Context ctx;
  std::string s(forceString(st, *args[1], ctx, pos));
  TracedVector<Value*> out;
  auto begin = std::sregex_iterator(s.begin(), s.end(), regex);
  auto end = std::sregex_iterator();
  auto strValue = [&](const std::string& x) {
    Value* r = st.heap().allocValue();
    st.mkString(*r, x);
    return r;
  };
  if (begin == end) {
    st.mkList(v, 1);
    v.list.elems[0] = args[1];
    return;
  }
  std::string suffix;
  for (auto i = begin; i != end; ++i) {
    const std::smatch& m = *i;
    out.push_back(strValue(m.prefix().str()));
    Value* groups = st.heap().allocValue();
    st.mkList(*groups, m.size() - 1);
    for (size_t j = 1; j < m.size(); ++j) groups->list.elems[j - 1] = groupValue(st, m[j]);
    out.push_back(groups);
    suffix = m.suffix().str();
  }
  out.push_back(strValue(suffix));
  st.mkList(v, out.size());
  std::copy(out.begin(), out.end(), v.list.elems);
}

constexpr BuiltinDef kDefs[] = {
    {"__match", 2, primMatch},
    {"__split", 2, primSplit},
};

}  // namespace

void registerRegexBuiltins(EvalState& state) { addBuiltins(state, kDefs); }

}  // namespace kiln::eval
