// EvalState: forcing, function calls, allocation and errors (parsing and
// files: eval_files.cc).
#include "kiln/evaluator/eval_state.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>

#include <boost/container/small_vector.hpp>

#include "kiln/common/file.h"
#include "builtins.h"
#include "kiln/evaluator/eval_stats.h"
#include "eval_parts.h"
#include "gc_support.h"

namespace kiln::eval {

EvalState::EvalState(EvalSettings s) : settings(std::move(s)) {
  initGarbageCollector();
  // Zeroed first: the collector scans the whole state (a root, often on a
  // stack), and the storage's padding and unused tail must not hold stale
  // pointers that would keep garbage alive.
  std::memset(parts_, 0, sizeof(parts_));
  EvalParts::construct(*this);
  // A constructor that throws runs no destructor: undo what was done.
  struct Undo {
    EvalState* st;
    bool rooted = false;
    ~Undo() {
      if (!st) return;
      if (rooted) GC_remove_roots(st, st + 1);
      if (st->registeredThread_) GC_unregister_my_thread();
      EvalParts::destroy(*st);
    }
  } undo{this};
  if (!GC_thread_is_registered()) {
    GC_stack_base sb;
    if (GC_get_stack_base(&sb) != GC_SUCCESS || GC_register_my_thread(&sb) != GC_SUCCESS)
      throw Error("cannot register the evaluating thread with the garbage collector");
    registeredThread_ = true;
  }
  GC_add_roots(this, this + 1);  // its values and free list, wherever it lives
  undo.rooted = true;
  struct {
    Symbol* sym;
    const char* name;
  } const known[] = {
      {&sOutPath, "outPath"}, {&sDrvPath, "drvPath"}, {&sType, "type"}, {&sName, "name"},
      {&sValue, "value"}, {&sFunctor, "__functor"}, {&sToString, "__toString"},
      {&sOverrides, "__overrides"}, {&sFile, "file"}, {&sLine, "line"}, {&sColumn, "column"},
      {&sSuccess, "success"}, {&sOutputs, "outputs"}, {&sOutputName, "outputName"},
      {&sSystem, "system"}, {&sBuilder, "builder"}, {&sArgs, "args"},
      {&sRecurseForDerivations, "recurseForDerivations"}, {&sIgnoreNulls, "__ignoreNulls"},
      {&sStructuredAttrs, "__structuredAttrs"}, {&sAll, "all"}, {&sKey, "key"},
      {&sOperator, "operator"}, {&sStartSet, "startSet"}, {&sPath, "path"},
      {&sPrefix, "prefix"}, {&sContentAddressed, "__contentAddressed"}, {&sRight, "right"},
      {&sWrong, "wrong"}, {&sMeta, "meta"}, {&sOr, "or"}, {&sBody, "body"},
      {&sOutputHash, "outputHash"}, {&sOutputHashAlgo, "outputHashAlgo"},
      {&sOutputHashMode, "outputHashMode"}, {&sAllowedReferences, "allowedReferences"},
      {&sWith, "with"}};
  for (auto& k : known) *k.sym = symbols.intern(k.name);
  vEmptyAttrs.mkAttrs(heap().allocBindings(0));
  vTrue.mkBool(true);
  vFalse.mkBool(false);
  vNull.mkNull();
  // Pure evaluation ignores the search path, as Nix 2.8 does.
  for (const std::string& e : settings.pureEval ? std::vector<std::string>{} : settings.searchPath) {
    size_t eq = e.find('=');
    if (eq == std::string::npos) searchPathEntries.push_back({"", e});
    else searchPathEntries.push_back({e.substr(0, eq), e.substr(eq + 1)});
  }
  initAllowedPaths();
  createBaseEnv();
  heap().startCollecting();
  undo.st = nullptr;
}

EvalState::~EvalState() {
  EvalParts::destroy(*this);
  GC_remove_roots(this, this + 1);
  if (registeredThread_) GC_unregister_my_thread();
}

void EvalState::mkString(Value& v, std::string_view s, const Context& ctx) {
  const char** c = nullptr;
  if (const size_t n = ctx.empty() ? 0 : ctx.size(); n == 1) {
    c = singleContext(ctx.begin()->data());  // no array of its own
  } else if (n) {
    c = heap().allocContext(n);
    size_t i = 0;
    for (auto& x : ctx) c[i++] = x.data();  // arena strings (addContext)
  }
  v.mkString(heap().copyString(s), s.size(), c);
}

const char* makeContextEntry(Arena& arena, std::initializer_list<std::string_view> parts) {
  size_t n = 0;
  for (auto p : parts) n += p.size();
  constexpr size_t kArray = 2 * sizeof(const char*);
  auto** array = static_cast<const char**>(arena.allocate(kArray + n + 1, alignof(const char*)));
  char* out = reinterpret_cast<char*>(array) + kArray;
  char* w = out;
  for (auto p : parts) w = std::copy(p.begin(), p.end(), w);
  *w = 0;
  array[0] = out;
  array[1] = nullptr;
  return out;
}

void mkStorePathString(EvalState& st, Value& v, std::string_view path) {
  const char* entry = makeContextEntry(st.arena, {path});
  v.mkString(entry, path.size(), singleContext(entry));
}

const std::vector<std::string_view>& Context::sorted() const {
  if (!sorted_) compact();
  return items_;
}

void Context::compact() const {
  std::sort(items_.begin(), items_.end());
  items_.erase(std::unique(items_.begin(), items_.end()), items_.end());
  sorted_ = true;
  compactAt_ = std::max<size_t>(64, items_.size() * 2);
}

void copyContext(const Value& v, Context& ctx) {
  if (v.type == VType::kString && v.str.context)
    for (const char** p = v.str.context; *p; ++p) ctx.insert(*p);
}

void mkPos(EvalState& st, Value& v, PosIdx pos) {
  if (pos == kNoPos) {
    v.mkNull();
    return;
  }
  Pos p = st.positions.get(pos);
  Bindings* b = st.heap().allocBindings(3);
  Value* f = st.heap().allocValue();
  st.mkString(*f, st.positions.origin(p.origin).path);
  Value* l = st.heap().allocValue();
  l->mkInt(p.line);
  Value* c = st.heap().allocValue();
  c->mkInt(p.column);
  b->push(st.sFile, f);
  b->push(st.sLine, l);
  b->push(st.sColumn, c);
  st.mkAttrs(v, b);
}

void throwError(EvalState& st, PosIdx pos, const std::string& msg) {
  throw EvalError(msg + st.positions.snippet(pos));
}

void throwTypeError(EvalState& st, PosIdx pos, const char* expected, const Value& v) {
  throwError(st, pos, std::string("value is ") + showType(v) + " while " + expected + " was expected");
}

namespace {

// A name's first 8 bytes as one big-endian number, zero-padded: two names
// whose prefixes differ order as their numbers do (a name that ends first
// is a prefix of the other, and pads with 0 against a byte it lacks).
uint64_t namePrefix(std::string_view s) {
  uint64_t key = 0;
  std::memcpy(&key, s.data(), std::min(s.size(), sizeof key));
  if constexpr (std::endian::native == std::endian::little) key = __builtin_bswap64(key);
  return key;
}

}  // namespace

std::vector<const Attr*> sortedByName(EvalState& st, const Bindings* b) {
  // Sorted on each name's prefix, read once per name, and the whole names
  // only where prefixes tie: a derivation's 30-odd attributes sorted on
  // their texts cost a symbol table read and a memcmp per comparison.
  struct Keyed {
    uint64_t prefix;
    std::string_view name;
    const Attr* attr;
  };
  boost::container::small_vector<Keyed, 64> keyed;
  keyed.reserve(b->size);
  for (auto& a : *b) {
    std::string_view name = st.symbols.name(a.name);
    keyed.push_back({namePrefix(name), name, &a});
  }
  std::sort(keyed.begin(), keyed.end(), [](const Keyed& x, const Keyed& y) {
    return x.prefix != y.prefix ? x.prefix < y.prefix : x.name < y.name;
  });
  std::vector<const Attr*> out;
  out.reserve(b->size);
  for (auto& k : keyed) out.push_back(k.attr);
  return out;
}

void EvalState::forceThunk(Value& v, PosIdx pos) {
  if (threads().active()) return forceThunkThreaded(v, pos);
  if (v.type == VType::kThunk) {
    Env* env = v.thunk.env;
    Expr* e = v.thunk.expr;
    v.type = VType::kBlackhole;
    try {
      e->eval(*this, *env, v);
    } catch (...) {
      v.mkThunk(env, e);
      throw;
    }
  } else if (v.type == VType::kApp) {
    Value* l = v.app.left;
    Value* r = v.app.right;
    v.type = VType::kBlackhole;
    try {
      callFunction(*this, *l, *r, v, pos);
    } catch (...) {
      v.mkApp(l, r);
      throw;
    }
  } else if (v.type == VType::kBlackhole) {
    throw InfiniteRecursionError("infinite recursion encountered" + positions.snippet(pos));
  }
}

int64_t forceInt(EvalState& st, Value& v, PosIdx pos) {
  st.forceValue(v, pos);
  if (v.type != VType::kInt) throwTypeError(st, pos, "an integer", v);
  return v.integer;
}

double forceFloat(EvalState& st, Value& v, PosIdx pos) {
  st.forceValue(v, pos);
  if (v.type == VType::kInt) return static_cast<double>(v.integer);
  if (v.type != VType::kFloat) throwTypeError(st, pos, "a float", v);
  return v.fpoint;
}

bool forceBool(EvalState& st, Value& v, PosIdx pos) {
  st.forceValue(v, pos);
  if (v.type != VType::kBool) throwTypeError(st, pos, "a Boolean", v);
  return v.boolean;
}

void forceAttrs(EvalState& st, Value& v, PosIdx pos) {
  st.forceValue(v, pos);
  if (v.type != VType::kAttrs) throwTypeError(st, pos, "a set", v);
}

void forceList(EvalState& st, Value& v, PosIdx pos) {
  st.forceValue(v, pos);
  if (v.type != VType::kList) throwTypeError(st, pos, "a list", v);
}

void forceFunction(EvalState& st, Value& v, PosIdx pos) {
  st.forceValue(v, pos);
  if (!v.isFunction() && !(v.type == VType::kAttrs && v.attrs->find(st.sFunctor)))
    throwTypeError(st, pos, "a function", v);
}

std::string_view forceString(EvalState& st, Value& v, PosIdx pos) {
  st.forceValue(v, pos);
  if (v.type != VType::kString) throwTypeError(st, pos, "a string", v);
  return v.sv();
}

std::string_view forceString(EvalState& st, Value& v, Context& ctx, PosIdx pos) {
  std::string_view s = forceString(st, v, pos);
  copyContext(v, ctx);
  return s;
}

std::string_view forceStringNoCtx(EvalState& st, Value& v, PosIdx pos) {
  std::string_view s = forceString(st, v, pos);
  if (v.str.context && *v.str.context)
    throwError(st, pos, "the string '" + std::string(s) +
                        "' is not allowed to refer to a store path (such as '" +
                        std::string(*v.str.context) + "')");
  return s;
}

bool evalBool(EvalState& st, Env& env, Expr* e, PosIdx pos) {
  Value v;
  e->eval(st, env, v);
  if (v.type != VType::kBool) throwTypeError(st, e->pos ? e->pos : pos, "a Boolean", v);
  return v.boolean;
}

void evalAttrs(EvalState& st, Env& env, Expr* e, Value& v) {
  e->eval(st, env, v);
  if (v.type != VType::kAttrs) throwTypeError(st, e->pos, "a set", v);
}

namespace {
struct DepthGuard {
  uint32_t& d;
  ~DepthGuard() { --d; }
};

}  // namespace

static std::string lambdaName(EvalState& st, const ExprLambda& l) {
  if (l.name) return "function '" + std::string(st.symbols.name(l.name)) + "'";
  return "anonymous function at " + st.positions.show(l.pos);
}

// Evaluates a lambda's body; with --show-trace an error passing through
// gets the function and its call site as trace lines, as in Nix 2.8.
static void evalBody(EvalState& st, ExprLambda& lambda, Env& env, Value& v, PosIdx pos) {
  if (__builtin_expect(!st.settings.showTrace, 1)) {
    lambda.body->eval(st, env, v);
    return;
  }
  try {
    lambda.body->eval(st, env, v);
  } catch (EvalError& e) {
    e.addTrace((lambda.name ? "while evaluating '" + std::string(st.symbols.name(lambda.name)) + "'"
                            : std::string("while evaluating anonymous lambda")) +
               st.positions.snippet(lambda.pos));
    e.addTrace("from call site" + st.positions.snippet(pos));
    throw;
  }
}

// Fills the slots of `env` for a call of `lambda`, which has formals, with
// `args0`: the argument itself if named (`args@`), then each formal.
static void bindFormals(EvalState& st, ExprLambda& lambda, Env& env,
                        Value* args0, PosIdx pos) {
  uint32_t displ = 0;
  Value& arg = *args0;
  st.forceValue(arg, pos);
  if (arg.type != VType::kAttrs)
    throwError(st, pos,
               lambdaName(st, lambda) + " called with " + showType(arg) +
                   " while a set was expected");
  if (lambda.arg) env.values[displ++] = args0;
  size_t used = 0;
  for (auto& f : lambda.formals->formals) {
    Value* j = arg.attrs->get(f.name);
    if (j) {
      ++used;
      env.values[displ++] = j;
    } else if (f.def) {
      env.values[displ++] = f.def->maybeThunk(st, env);
    } else {
      throwError(st, pos,
                 lambdaName(st, lambda) +
                     " called without required argument '" +
                     std::string(st.symbols.name(f.name)) + "'");
    }
  }
  if (!lambda.formals->ellipsis && used != arg.attrs->size)
    for (auto& a : *arg.attrs)
      if (!lambda.formals->find(a.name))
        throwError(st, pos,
                   lambdaName(st, lambda) +
                       " called with unexpected argument '" +
                       std::string(st.symbols.name(a.name)) + "'");
}

// Fills the slots of `env` for a call of `lambda` with `arg`.
static inline void bindArgs(EvalState& st, ExprLambda& lambda, Env& env,
                            Value* arg, PosIdx pos) {
  if (!lambda.formals)
    env.values[0] = arg;
  else
    bindFormals(st, lambda, env, arg, pos);
}

// `buffer` as an environment (its slots follow `up`), its address hidden
// from the optimiser, which would size `values` by Env's declaration (as
// for an environment from the allocator).
static inline Env* envIn(Value** buffer) {
  asm("" : "+r"(buffer));
  return reinterpret_cast<Env*>(buffer);
}

// A call of `fun`, a lambda with stackEnvArgs (1 or 2), with that many of
// `args`, into `out`, its environments on this frame's stack: nothing the
// call leaves refers to them. For `a: b: body` the closure `b: body` is not
// made: `b`'s environment is put right under `a`'s. Not zeroed: such a
// lambda fills every slot before anything reads one (its defaults are
// constants).
[[gnu::noinline]] static void callOnStack(EvalState& st, const Value& fun,
                                          Value** args, Value& out,
                                          PosIdx pos) {
  Value* buffers[ExprLambda::kMaxStackEnvs][1 + ExprLambda::kMaxStackEnv];
  ExprLambda* lambda = fun.lambda.fun;
  Env* env = envIn(buffers[0]);
  env->up = fun.lambda.env;
  bindArgs(st, *lambda, *env, args[0], pos);
  if (lambda->stackEnvArgs == 2) {
    static_assert(ExprLambda::kMaxStackEnvs == 2);
    auto* inner =
        static_cast<ExprLambda*>(lambda->body);  // a lambda (stackEnvArgsOf)
    Env* innerEnv = envIn(buffers[1]);
    innerEnv->up = env;
    bindArgs(st, *inner, *innerEnv, args[1], pos);
    lambda = inner;
    env = innerEnv;
  }
  evalBody(st, *lambda, *env, out, pos);
}

void callFunction(EvalState& st, Value& fun, size_t nargs, Value** args,
                  Value& vRes, PosIdx pos, bool loneEnvs) {
  uint32_t& d = st.threads().depth();
  if (++d > st.settings.maxCallDepth) {
    --d;
    throw InfiniteRecursionError("stack overflow; max-call-depth exceeded (" +
                                 std::to_string(st.settings.maxCallDepth) +
                                 " nested calls; possible infinite recursion)" +
                                 st.positions.snippet(pos));
  }
  DepthGuard guard{d};
  st.forceValue(fun, pos);  // in place: a copy of a shared thunk could be torn
  Value vCur = fun;
  while (nargs > 0) {
    if (vCur.type == VType::kLambda) {
      ExprLambda& lambda = *vCur.lambda.fun;
      if (const size_t n = lambda.stackEnvArgs; n && nargs >= n) {
        // Nothing the call leaves refers to its environments: on the stack
        // (the collector scans it), no heap object.
        if (nargs == n) {
          callOnStack(st, vCur, args, vRes, pos);
          return;
        }
        Value tmp;
        callOnStack(st, vCur, args, tmp, pos);
        vCur = tmp;
        nargs -= n;
        args += n;
        continue;
      }
      Env& env2 = st.heap().allocEnv(lambda.envSize(), loneEnvs);
      env2.up = vCur.lambda.env;
      bindArgs(st, lambda, env2, args[0], pos);
      if (nargs == 1) {
        evalBody(st, lambda, env2, vRes, pos);
        return;
      }
      Value tmp;
      evalBody(st, lambda, env2, tmp, pos);
      vCur = tmp;
      --nargs;
      ++args;
    } else if (vCur.type == VType::kPrimOp || vCur.type == VType::kPrimOpApp) {
      size_t applied = 0;
      const Value* f = &vCur;
      while (f->type == VType::kPrimOpApp) {
        ++applied;
        f = f->primOpApp.left;
      }
      const PrimOp* p = f->primOp;
      if (applied + nargs < p->arity) {
        Value* left = st.heap().allocValue();
        *left = vCur;
        for (size_t i = 0; i + 1 < nargs; ++i) {
          Value* next = st.heap().allocValue();
          next->mkPrimOpApp(left, args[i]);
          left = next;
        }
        vRes.mkPrimOpApp(left, args[nargs - 1]);
        return;
      }
      size_t need = p->arity - applied;
      Value* all[8];
      const Value* g = &vCur;
      for (size_t i = applied; i > 0; --i) {
        all[i - 1] = g->primOpApp.right;
        g = g->primOpApp.left;
      }
      for (size_t i = 0; i < need; ++i) all[applied + i] = args[i];
      if (nargs == need) {
        p->fn(st, pos, all, vRes);
        return;
      }
      Value tmp;
      p->fn(st, pos, all, tmp);
      vCur = tmp;
      nargs -= need;
      args += need;
    } else if (vCur.type == VType::kAttrs && vCur.attrs->find(st.sFunctor)) {
      Value* functor = vCur.attrs->get(st.sFunctor);
      Value* self = st.heap().allocValue();
      *self = vCur;
      Value* args2[2] = {self, args[0]};
      Value tmp;
      callFunction(st, *functor, 2, args2, tmp, pos);
      vCur = tmp;
      --nargs;
      ++args;
    } else {
      throwError(st, pos, std::string("attempt to call something which is not a function but ") +
                          showType(vCur));
    }
  }
  vRes = vCur;
}

void EvalState::autoCallFunction(Bindings* args, Value& fun, Value& res) {
  forceValue(fun, kNoPos);
  if (fun.type == VType::kAttrs && fun.attrs->find(sFunctor)) {
    Value* self = heap().allocValue();
    *self = fun;
    Value v2;
    callFunction(*this, *fun.attrs->get(sFunctor), *self, v2, kNoPos);
    forceValue(v2, kNoPos);
    autoCallFunction(args, v2, res);
    return;
  }
  if (fun.type != VType::kLambda || !fun.lambda.fun->formals) {
    res = fun;
    return;
  }
  Formals* formals = fun.lambda.fun->formals;
  Bindings* b = heap().allocBindings(formals->ellipsis ? args->size : formals->formals.size());
  if (formals->ellipsis) {
    for (auto& a : *args) b->push(a.name, a.value, a.pos);
  } else {
    for (auto& f : formals->formals) {
      if (const Attr* a = args->find(f.name)) b->push(a->name, a->value, a->pos);
      else if (!f.def)
        throw EvalError("cannot evaluate a function that has an argument without a value ('" +
                        std::string(symbols.name(f.name)) + "')" + positions.snippet(f.pos));
    }
  }
  Value* arg = heap().allocValue();
  mkAttrs(*arg, b);
  callFunction(*this, fun, *arg, res, kNoPos);
}

void EvalState::setStoreWriter(StoreWriter* writer) { this->writer().set(writer); }

StoreWriter* EvalState::storeWriter() { return writer().get(); }

Value* EvalState::allocValue() { return heap().allocValue(); }

Bindings* EvalState::allocBindings(uint32_t capacity) { return heap().allocBindings(capacity); }

void EvalState::eval(Expr* e, Value& v) { e->eval(*this, *builtins().baseEnv(), v); }

void EvalState::mkThunk(Value& v, Expr* e) { v.mkThunk(builtins().baseEnv(), e); }

}  // namespace kiln::eval
