// Coercions to strings and paths, equality and ordering, deep forcing.
#include <unordered_set>

#include "builtins.h"
#include "kiln/common/file.h"
#include "kiln/store/store_path.h"
#include "print.h"

namespace kiln::eval {

const char* typeOfName(const Value& v) {
  switch (v.type) {
    case VType::kInt: return "int";
    case VType::kFloat: return "float";
    case VType::kBool: return "bool";
    case VType::kNull: return "null";
    case VType::kString: return "string";
    case VType::kPath: return "path";
    case VType::kAttrs: return "set";
    case VType::kList: return "list";
    case VType::kLambda: case VType::kPrimOp: case VType::kPrimOpApp: return "lambda";
    default: return "thunk";
  }
}

const char* showType(const Value& v) {
  switch (v.type) {
    case VType::kInt: return "an integer";
    case VType::kFloat: return "a float";
    case VType::kBool: return "a Boolean";
    case VType::kNull: return "null";
    case VType::kString: return "a string";
    case VType::kPath: return "a path";
    case VType::kAttrs: return "a set";
    case VType::kList: return "a list";
    case VType::kLambda: return "a function";
    case VType::kPrimOp: return "a built-in function";
    case VType::kPrimOpApp: return "a partially applied built-in function";
    default: return "a thunk";
  }
}

void ContextUnion::add(const char** c) {
  if (!c || c == single_) return;
  if (!single_ && set_.empty()) {
    single_ = c;
    return;
  }
  if (single_) {
    for (const char** p = single_; *p; ++p) set_.insert(*p);
    single_ = nullptr;
  }
  for (; *c; ++c) set_.insert(*c);
}

void ContextUnion::add(const Context& ctx) {
  if (ctx.empty()) return;
  if (single_) {
    for (const char** p = single_; *p; ++p) set_.insert(*p);
    single_ = nullptr;
  }
  set_.insert(ctx.begin(), ctx.end());
}

const char** ContextUnion::result(EvalState& state) const {
  if (single_ || set_.empty()) return single_;
  if (set_.size() == 1) return singleContext(set_.begin()->data());  // no array of its own
  const char** c = state.heap().allocContext(set_.size());
  size_t i = 0;
  for (auto& x : set_) c[i++] = x.data();
  return c;
}

void appendCoerced(EvalState& st, PosIdx pos, Value& v, std::string& out, ContextUnion& ctx,
                              bool coerceMore, bool copyToStore, bool canonicalizePath) {
  st.forceValue(v, pos);
  Value* s = &v;
  if (v.type == VType::kAttrs && !v.attrs->get(st.sToString))
    if (Value* o = v.attrs->get(st.sOutPath)) {
      st.forceValue(*o, pos);
      s = o;
    }
  if (s->type == VType::kString) {
    out += s->sv();
    ctx.add(s->str.context);
    return;
  }
  Context c;
  out += coerceToString(st, pos, v, c, coerceMore, copyToStore, canonicalizePath);
  ctx.add(c);
}

std::string coerceToString(EvalState& st, PosIdx pos, Value& v, Context& ctx, bool coerceMore,
                                      bool copyToStore, bool canonicalizePath) {
  st.forceValue(v, pos);
  switch (v.type) {
    case VType::kString:
      copyContext(v, ctx);
      return std::string(v.sv());
    case VType::kPath: {
      std::string p = canonicalizePath ? canonPath(v.path) : std::string(v.path);
      return copyToStore ? copyPathToStore(st, ctx, p) : p;
    }
    case VType::kAttrs: {
      if (Value* f = v.attrs->get(st.sToString)) {
        Value* self = st.heap().allocValue();
        *self = v;
        Value res;
        callFunction(st, *f, *self, res, pos);
        return coerceToString(st, pos, res, ctx, coerceMore, copyToStore);
      }
      if (Value* o = v.attrs->get(st.sOutPath)) return coerceToString(st, pos, *o, ctx, coerceMore, copyToStore);
      break;
    }
    default:
      break;
  }
  if (coerceMore) {
    switch (v.type) {
      case VType::kBool: return v.boolean ? "1" : "";
      case VType::kNull: return "";
      case VType::kInt: return std::to_string(v.integer);
      case VType::kFloat: return std::to_string(v.fpoint);
      case VType::kList: {
        std::string r;
        for (size_t n = 0; n < v.list.size; ++n) {
          Value& e = *v.list.elems[n];
          st.forceValue(e, pos);
          if (e.type == VType::kString) {  // the common case, without a temporary
            r += e.sv();
            copyContext(e, ctx);
          } else {
            r += coerceToString(st, pos, e, ctx, coerceMore, copyToStore);
          }
          if (n + 1 < v.list.size && (e.type != VType::kList || e.list.size != 0)) r += " ";
        }
        return r;
      }
      default:
        break;
    }
  }
  throwError(st, pos, std::string("cannot coerce ") + showType(v) + " to a string");
}

std::string coerceToPath(EvalState& st, PosIdx pos, Value& v, Context& ctx) {
  std::string s = coerceToString(st, pos, v, ctx, false, false);
  if (s.empty() || s[0] != '/')
    throwError(st, pos, "string '" + s + "' doesn't represent an absolute path");
  // A store object this evaluation made may still be queued in the
  // writer: the path is about to be read, so it must exist first.
  StoreWriter* storeWriter = st.writer().get();
  if (storeWriter && s.size() > st.settings.storeDir.size() && s.starts_with(st.settings.storeDir) &&
      s[st.settings.storeDir.size()] == '/') {
    try {
      storeWriter->flush();
    } catch (const Error& e) {
      throwError(st, pos, e.what());
    }
  }
  return s;
}

std::string copyPathToStore(EvalState& st, Context& ctx, const std::string& path) {
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".drv") == 0)
    throw EvalError("file names are not allowed to end in '.drv'");
  std::string dst = st.files().copiedSource(path, [&] {  // under its lock: no evaluation below
    store::StoreDir storeDir(st.settings.storeDir);
    std::string name = baseNameOf(path);
    std::string src = st.checkSourcePath(path);
    Hash h = narHashOfPath(src);
    std::string out = storeDir.printPath(storeDir.makeFixedOutputPath(name, true, h));
    if (StoreWriter* storeWriter = st.writer().get()) try {
        storeWriter->addSource(out, src, {}, true);
      } catch (const EvalError&) {
        throw;
      } catch (const Error& e) {
        throw EvalError(e.what());
      }
    st.allowPath(out);
    return out;
  });
  addContext(st, ctx, dst);
  return dst;
}

bool isDerivation(EvalState& st, Value& v) {
  if (v.type != VType::kAttrs) return false;
  Value* t = v.attrs->get(st.sType);
  if (!t) return false;
  st.forceValue(*t, kNoPos);
  return t->type == VType::kString && t->sv() == "derivation";
}

bool eqValues(EvalState& st, Value& v1, Value& v2) {
  st.forceValue(v1, kNoPos);
  st.forceValue(v2, kNoPos);
  if (&v1 == &v2) return true;
  if (v1.type == VType::kInt && v2.type == VType::kFloat) return v1.integer == v2.fpoint;
  if (v1.type == VType::kFloat && v2.type == VType::kInt) return v1.fpoint == v2.integer;
  if (v1.type != v2.type) {
    if (v1.isFunction() && v2.isFunction()) return false;
    return false;
  }
  switch (v1.type) {
    case VType::kInt: return v1.integer == v2.integer;
    case VType::kFloat: return v1.fpoint == v2.fpoint;
    case VType::kBool: return v1.boolean == v2.boolean;
    case VType::kNull: return true;
    case VType::kString: return v1.sv() == v2.sv();
    case VType::kPath: return std::strcmp(v1.path, v2.path) == 0;
    case VType::kList:
      if (v1.list.size != v2.list.size) return false;
      for (size_t i = 0; i < v1.list.size; ++i)
        if (!eqValues(st, *v1.list.elems[i], *v2.list.elems[i])) return false;
      return true;
    case VType::kAttrs: {
      if (isDerivation(st, v1) && isDerivation(st, v2)) {
        Value* a = v1.attrs->get(st.sOutPath);
        Value* b = v2.attrs->get(st.sOutPath);
        if (a && b) return eqValues(st, *a, *b);
      }
      if (v1.attrs->size != v2.attrs->size) return false;
      for (auto i = v1.attrs->begin(), j = v2.attrs->begin(); i != v1.attrs->end(); ++i, ++j) {
        if (i->name != j->name) return false;
        if (!eqValues(st, *i->value, *j->value)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

bool lessThan(EvalState& st, Value& a, Value& b, PosIdx pos) {
  st.forceValue(a, pos);
  st.forceValue(b, pos);
  if (a.type == VType::kInt && b.type == VType::kFloat) return a.integer < b.fpoint;
  if (a.type == VType::kFloat && b.type == VType::kInt) return a.fpoint < b.integer;
  if (a.type != b.type)
    throwError(st, pos, std::string("cannot compare ") + showType(a) + " with " + showType(b));
  switch (a.type) {
    case VType::kInt: return a.integer < b.integer;
    case VType::kFloat: return a.fpoint < b.fpoint;
    case VType::kString: return a.sv() < b.sv();
    case VType::kPath: return std::strcmp(a.path, b.path) < 0;
    case VType::kList:
      for (size_t i = 0;; ++i) {
        if (i == b.list.size) return false;
        if (i == a.list.size) return true;
        if (!eqValues(st, *a.list.elems[i], *b.list.elems[i]))
          return lessThan(st, *a.list.elems[i], *b.list.elems[i], pos);
      }
    default:
      throwError(st, pos, std::string("cannot compare ") + showType(a) + " with " + showType(b));
  }
}

void EvalState::forceValueDeep(Value& v) {
  std::unordered_set<const Value*> seen;
  std::function<void(Value&)> recurse = [&](Value& x) {
    if (!seen.insert(&x).second) return;
    forceValue(x, kNoPos);
    if (x.type == VType::kAttrs) {
      for (auto& a : *x.attrs) {
        try {
          recurse(*a.value);
        } catch (EvalError& e) {
          e.addTrace("while evaluating the attribute '" + std::string(symbols.name(a.name)) + "'");
          throw;
        }
      }
    } else if (x.type == VType::kList) {
      for (size_t i = 0; i < x.list.size; ++i) recurse(*x.list.elems[i]);
    }
  };
  recurse(v);
}

}  // namespace kiln::eval
