// String builtins: toString, substring, replaceStrings, versions, names.
#include <array>
#include <optional>

#include "builtins.h"
#include "scratch_string.h"

namespace kiln::eval {

namespace {

void primToString(EvalState& st, PosIdx pos, Value** args, Value& v) {
  // A string, or a derivation's string outPath, is its own result: the
  // same characters and context array, nothing copied (`map toString
  // deps` made a string and a context array per dependency).
  st.forceValue(*args[0], pos);
  const Value* src = args[0];
  if (src->type == VType::kAttrs && !src->attrs->get(st.sToString))
    if (Value* o = src->attrs->get(st.sOutPath)) {
      st.forceValue(*o, pos);
      src = o;
    }
  if (src->type == VType::kString) {
    v = *src;
    return;
  }
  Context ctx;
  std::string s = coerceToString(st, pos, *args[0], ctx, true, false);
  st.mkString(v, s, ctx);
}

void primSubstring(EvalState& st, PosIdx pos, Value** args, Value& v) {
  int64_t start = forceInt(st, *args[0], pos);
  int64_t len = forceInt(st, *args[1], pos);
  Context ctx;
  std::string s = coerceToString(st, pos, *args[2], ctx);
  if (start < 0) throwError(st, pos, "negative start position in 'substring'");
  size_t ustart = static_cast<size_t>(start);
  std::string r = ustart >= s.size() ? std::string() : s.substr(ustart, len < 0 ? std::string::npos : static_cast<size_t>(len));
  st.mkString(v, r, ctx);
}

void primStringLength(EvalState& st, PosIdx pos, Value** args, Value& v) {
  Context ctx;
  v.mkInt(static_cast<int64_t>(coerceToString(st, pos, *args[0], ctx).size()));
}

// Forces every element of a list to a string, in order (a type error for
// the first that is not), without measuring them.
void forceStrings(EvalState& st, Value& list, PosIdx pos) {
  for (size_t i = 0; i < list.list.size; ++i) {
    Value& e = *list.list.elems[i];
    st.forceValue(e, pos);
    if (e.type != VType::kString) forceString(st, e, pos);  // throws its error
  }
}

// The length of pattern `f` if it occurs in s at p, else -1.
inline ptrdiff_t matchAt(std::string_view s, size_t p, const char* f) {
  size_t k = 0;
  while (f[k] && p + k < s.size() && s[p + k] == f[k]) ++k;
  return f[k] ? -1 : static_cast<ptrdiff_t>(k);
}

// Appends s with the first of `from` that matches at each position replaced
// by the `to` of the same index (the first match wins, scanning on after
// it), as Nix 2.8's replaceStrings; adds the context of each replacement
// used. Returns whether anything was replaced. Patterns are compared as the
// C strings they are, and a replacement is measured only when used.
bool replaceInto(std::string& res, std::string_view s, Value& from, Value& to, Context& ctx) {
  // Bytes some pattern starts with: positions at other bytes are copied in
  // runs without trying the patterns. An empty pattern matches everywhere.
  std::array<bool, 256> starts{};
  bool anyEmpty = false;
  for (size_t i = 0; i < from.list.size; ++i) {
    auto c = static_cast<unsigned char>(from.list.elems[i]->str.s[0]);
    if (c) starts[c] = true;
    else anyEmpty = true;
  }
  const size_t n = s.size();
  bool replaced = false;
  for (size_t p = 0; p <= n;) {
    if (!anyEmpty) {
      size_t q = p;
      while (q < n && !starts[static_cast<unsigned char>(s[q])]) ++q;
      res.append(s.data() + p, q - p);
      p = q;
      if (p == n) break;
    }
    ptrdiff_t len = -1;
    size_t i = 0;
    for (; i < from.list.size; ++i) {
      const char* f = from.list.elems[i]->str.s;
      if (*f && (p >= n || s[p] != *f)) continue;
      if ((len = matchAt(s, p, f)) >= 0) break;
    }
    if (len >= 0) {
      replaced = true;
      res += to.list.elems[i]->sv();
      copyContext(*to.list.elems[i], ctx);
      if (len == 0) {
        if (p < n) res += s[p];
        ++p;
      } else {
        p += static_cast<size_t>(len);
      }
    } else {
      if (p < n) res += s[p];
      ++p;
    }
  }
  return replaced;
}

void primReplaceStrings(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceList(st, *args[0], pos);
  forceList(st, *args[1], pos);
  if (args[0]->list.size != args[1]->list.size)
    throwError(st, pos, "'from' and 'to' arguments to 'replaceStrings' have different lengths");
  // Like Nix 2.8, every pattern, then every replacement is forced, in
  // order, before the subject; a replacement's context joins the result's
  // only when used.
  forceStrings(st, *args[0], pos);
  forceStrings(st, *args[1], pos);
  Context ctx;
  std::string_view s = forceString(st, *args[2], ctx, pos);
  ScratchString scratch;
  std::string& res = scratch.str();
  bool replaced = replaceInto(res, s, *args[0], *args[1], ctx);
  // Nothing replaced: the subject itself, its context included (strings
  // are immutable), rather than a copy of it.
  if (!replaced && args[2]->type == VType::kString) {
    v = *args[2];
    return;
  }
  st.mkString(v, res, ctx);
}

void primConcatStringsSep(EvalState& st, PosIdx pos, Value** args, Value& v) {
  ContextUnion ctx;
  std::string_view sep = forceString(st, *args[0], pos);
  ctx.add(args[0]->str.context);
  forceList(st, *args[1], pos);
  ScratchString scratch;
  std::string& r = scratch.str();
  for (size_t i = 0; i < args[1]->list.size; ++i) {
    if (i) r += sep;
    appendCoerced(st, pos, *args[1]->list.elems[i], r, ctx);
  }
  v.mkString(st.heap().copyString(r), r.size(), ctx.result(st));
}

std::string_view nextComponent(std::string_view s, size_t& p) {
  while (p < s.size() && (s[p] == '.' || s[p] == '-')) ++p;
  size_t start = p;
  if (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) {
    while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) ++p;
  } else {
    while (p < s.size() && !std::isdigit(static_cast<unsigned char>(s[p])) && s[p] != '.' && s[p] != '-') ++p;
  }
  return s.substr(start, p - start);
}

std::optional<long long> asNumber(std::string_view c) {
  if (c.empty() || c.size() > 18) return std::nullopt;
  long long n = 0;
  for (char ch : c) {
    if (!std::isdigit(static_cast<unsigned char>(ch))) return std::nullopt;
    n = n * 10 + (ch - '0');
  }
  return n;
}

bool componentsLess(std::string_view c1, std::string_view c2) {
  auto n1 = asNumber(c1), n2 = asNumber(c2);
  if (n1 && n2) return *n1 < *n2;
  if (c1.empty() && n2) return true;
  if (c1 == "pre" && c2 != "pre") return true;
  if (c2 == "pre") return false;
  if (n2) return true;
  if (n1) return false;
  return c1 < c2;
}

int compareVersions(std::string_view a, std::string_view b) {
  size_t p1 = 0, p2 = 0;
  while (p1 < a.size() || p2 < b.size()) {
    auto c1 = nextComponent(a, p1);
    auto c2 = nextComponent(b, p2);
    if (componentsLess(c1, c2)) return -1;
    if (componentsLess(c2, c1)) return 1;
  }
  return 0;
}

void primCompareVersions(EvalState& st, PosIdx pos, Value** args, Value& v) {
  std::string a(forceStringNoCtx(st, *args[0], pos));
  std::string b(forceStringNoCtx(st, *args[1], pos));
  v.mkInt(compareVersions(a, b));
}

void primSplitVersion(EvalState& st, PosIdx pos, Value** args, Value& v) {
  std::string s(forceStringNoCtx(st, *args[0], pos));
  std::vector<std::string_view> parts;
  size_t p = 0;
  while (p < s.size()) {
    auto c = nextComponent(s, p);
    if (c.empty()) break;
    parts.push_back(c);
  }
  st.mkList(v, parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    v.list.elems[i] = st.heap().allocValue();
    st.mkString(*v.list.elems[i], parts[i]);
  }
}

void primParseDrvName(EvalState& st, PosIdx pos, Value** args, Value& v) {
  std::string s(forceStringNoCtx(st, *args[0], pos));
  std::string name = s, version;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == '-' && i + 1 < s.size() && !std::isalpha(static_cast<unsigned char>(s[i + 1]))) {
      name = s.substr(0, i);
      version = s.substr(i + 1);
      break;
    }
  Bindings* b = st.heap().allocBindings(2);
  Value* n = st.heap().allocValue();
  st.mkString(*n, name);
  Value* ver = st.heap().allocValue();
  st.mkString(*ver, version);
  b->push(st.sName, n);
  b->push(st.sym("version"), ver);
  st.mkAttrs(v, b);
}

std::string_view baseName(std::string_view path) {
  if (path.empty()) return "";
  size_t last = path.size() - 1;
  if (path[last] == '/' && last > 0) --last;
  size_t p = path.rfind('/', last);
  p = p == std::string_view::npos ? 0 : p + 1;
  return path.substr(p, last - p + 1);
}

void primBaseNameOf(EvalState& st, PosIdx pos, Value** args, Value& v) {
  Context ctx;
  std::string s = coerceToString(st, pos, *args[0], ctx, false, false);
  st.mkString(v, baseName(s), ctx);
}

void primDirOf(EvalState& st, PosIdx pos, Value** args, Value& v) {
  Context ctx;
  st.forceValue(*args[0], pos);
  std::string s = coerceToString(st, pos, *args[0], ctx, false, false);
  size_t p = s.rfind('/');
  std::string dir = p == std::string::npos ? "." : p == 0 ? "/" : s.substr(0, p);
  if (args[0]->type == VType::kPath) st.mkPath(v, dir);
  else st.mkString(v, dir, ctx);
}

void primToPath(EvalState& st, PosIdx pos, Value** args, Value& v) {
  Context ctx;
  std::string p = coerceToPath(st, pos, *args[0], ctx);
  st.mkString(v, canonPath(p), ctx);
}

constexpr BuiltinDef kDefs[] = {
    {"toString", 1, primToString},
    {"__substring", 3, primSubstring},
    {"__stringLength", 1, primStringLength},
    {"__replaceStrings", 3, primReplaceStrings},
    {"__concatStringsSep", 2, primConcatStringsSep},
    {"__compareVersions", 2, primCompareVersions},
    {"__splitVersion", 1, primSplitVersion},
    {"__parseDrvName", 1, primParseDrvName},
    {"baseNameOf", 1, primBaseNameOf},
    {"dirOf", 1, primDirOf},
    {"__toPath", 1, primToPath},
};

}  // namespace

void registerStringsBuiltins(EvalState& state) { addBuiltins(state, kDefs); }

}  // namespace kiln::eval
