// EvalState: forcing, function calls, allocation and errors (parsing and
// files: eval_files.cc).
#include "kiln/evaluator/eval_state.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>

#include "kiln/common/file.h"
#include "builtins.h"
#include "kiln/evaluator/eval_stats.h"
#include "gc_support.h"

namespace kiln::eval {

EvalState::EvalState(EvalSettings s) : settings(std::move(s)) {
  initGarbageCollector();
  if (evalStatsRequested()) counts_ = std::make_unique<AllocCounts>();
  if (!GC_thread_is_registered()) {
    GC_stack_base sb;
    if (GC_get_stack_base(&sb) != GC_SUCCESS || GC_register_my_thread(&sb) != GC_SUCCESS)
      throw Error("cannot register the evaluating thread with the garbage collector");
    registeredThread_ = true;
  }
  GC_add_roots(this, this + 1);  // its values and free list, wherever it lives
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
  vEmptyAttrs.mkAttrs(allocBindings(0));
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
  // KILN_NO_GC=1: nothing is collected (to measure what collection costs).
  collect_ = !std::getenv("KILN_NO_GC");
  if (!collect_) GC_disable();
}

EvalState::~EvalState() {
  for (SlotBlocks& b : blocks_) b = SlotBlocks();
  GC_remove_roots(this, this + 1);
  if (registeredThread_) GC_unregister_my_thread();
}

void* EvalState::allocMemory(size_t size, size_t align) {
  if (!collect_) {
    void* p = permanent.allocate(size, align);
    std::memset(p, 0, size);
    return p;
  }
  if (threaded_) {
    if (size <= kSizedMax) return allocSizedThreaded(size);
    void* p = withCollectorGate([&] { return GC_MALLOC(size); });  // zeroed
    if (!p) throw std::bad_alloc();
    return p;
  }
  void* p = GC_MALLOC(size);  // zeroed
  if (!p) throw std::bad_alloc();
  return p;
}

void EvalState::countAlloc(uint64_t* bySize, uint64_t n, uint64_t& count, uint64_t& total,
                           uint64_t bytes) {
  if (__builtin_expect(!counts_, 1)) return;
  if (bySize) __atomic_fetch_add(&bySize[AllocCounts::sizeBucket(n)], 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED);  // threads may count at once
  __atomic_fetch_add(&total, bytes, __ATOMIC_RELAXED);
}

Value* EvalState::allocValueSlow() {
  if (threaded_) return allocValueThreaded();
  if (!collect_) return permanent.make<Value>();
  if (counts_)  // the fast path found the block empty: a new one is taken
    countAlloc(nullptr, 0, counts_->valueBlocks, counts_->valueBytes,
               sizeof(Value) * kValuesPerBlock);
  static_assert(sizeof(Value) * kValuesPerBlock % 16 != 0);  // the collector's byte fits
  return new (takeSlot(blocks_[kValueStream], sizeof(Value), kValuesPerBlock)) Value();
}

void* EvalState::allocEnvSlot() {
  return takeSlot(threaded_ ? slots_[threadSlot()].blocks[kEnvStream] : blocks_[kEnvStream],
                  kEnvSlot, kEnvsPerBlock);
}

void* EvalState::takeSlot(SlotBlocks& s, size_t slot, size_t perBlock) {
  if (s.next == s.end) {
    s.next = static_cast<char*>(takeFromMany(s.freeBlocks, slot * perBlock));
    s.end = s.next + slot * perBlock;
  }
  void* p = s.next;
  s.next += slot;
  return p;
}

Env& EvalState::allocEnv(uint32_t size) {
  const size_t bytes = sizeof(Env) + sizeof(Value*) * size;
  if (counts_) countAlloc(counts_->envsBySize, size, counts_->envs, counts_->envBytes, bytes);
  // An environment of one variable (a plain lambda's: most of them) takes
  // 16 bytes in a block of seven (alone, a 32-byte granule).
  static_assert(sizeof(Env) + sizeof(Value*) == kEnvSlot && alignof(Env) <= alignof(Value));
  static_assert(kEnvSlot * kEnvsPerBlock < 128);  // one 128-byte object with the collector's byte
  Env* e = new (size == 1 && collect_ ? allocEnvSlot() : allocMemory(bytes, alignof(Env))) Env();
  return *e;
}

// A set's bytes: the header, `n` attributes, and a layer's base pointer.
static size_t bindingsBytes(uint32_t n, bool layered) {
  static_assert(sizeof(Bindings) == 8 && alignof(Bindings) == alignof(Attr));
  return sizeof(Bindings) + sizeof(Attr) * n + (layered ? sizeof(Bindings*) : 0);
}

Bindings* EvalState::allocBindings(uint32_t capacity, bool layered) {
  if (capacity >= (1u << 31)) throw EvalError("attribute set too large");
  const size_t bytes = bindingsBytes(capacity, layered);
  if (counts_)
    countAlloc(counts_->bindingsBySize, capacity, counts_->bindings, counts_->bindingsBytes, bytes);
  Bindings* b = new (allocMemory(bytes, alignof(Bindings))) Bindings();
  b->setCapacity(capacity);
  if (layered) b->setLayered();
  return b;
}

void EvalState::trimBindings(Bindings* b) {
  if (!collect_)
    permanent.shrinkLast(b, bindingsBytes(b->capacity(), b->layered()),
                         bindingsBytes(b->size, b->layered()));
  b->setCapacity(b->size);
}

Value** EvalState::allocList(size_t n) {
  if (counts_)
    countAlloc(counts_->listsBySize, n, counts_->lists, counts_->listBytes, sizeof(Value*) * n);
  // Empty lists (a third of a package set's lists) share one array: nothing is ever stored in it.
  static Value* noElems[1] = {nullptr};
  if (n == 0) return noElems;
  return static_cast<Value**>(allocMemory(sizeof(Value*) * n, alignof(Value*)));
}

void EvalState::mkString(Value& v, std::string_view s, const Context& ctx) {
  const char** c = nullptr;
  if (!ctx.empty()) {
    c = allocContext(ctx.size());
    size_t i = 0;
    for (auto& x : ctx) c[i++] = x.data();  // arena strings (addContext)
  }
  v.mkString(copyString(s), c);
}

// Strings hold no pointers, so they are atomic objects: the collector
// neither clears nor scans them. libgc's per-thread lists serve small
// ones; larger ones take its lock, behind the gate when threaded. The NUL
// goes in the byte the collector adds to every object (so that a pointer
// just past what was asked for still points into it): a pointer just past
// a string's characters points at its NUL, inside the object. With a byte
// of its own, one string in 16 took a 16-byte granule more.
char* EvalState::allocString(size_t len) {
  if (!collect_) return static_cast<char*>(arena.allocate(len + 1, 1));
  const size_t ask = len + (GC_get_all_interior_pointers() ? 0 : 1);
  if (counts_) countAlloc(nullptr, 0, counts_->strings, counts_->stringBytes, len + 1);
  return static_cast<char*>(allocAtomic(ask ? ask : 1));
}

const char** EvalState::allocContext(size_t n) {
  const size_t bytes = sizeof(const char*) * (n + 1);
  if (!collect_) return arena.makeArray<const char*>(n + 1);
  if (counts_) countAlloc(nullptr, 0, counts_->contexts, counts_->contextBytes, bytes);
  // As a string's NUL: the terminating nullptr's last byte takes the byte
  // the collector adds, so a one-entry array is one 16-byte granule.
  void* p = allocAtomic(bytes - (GC_get_all_interior_pointers() ? 1 : 0));
  std::memset(p, 0, bytes);
  return static_cast<const char**>(p);
}

void* EvalState::allocAtomic(size_t bytes) {
  // libgc's per-thread lists hold objects of up to 25 granules (with its
  // extra byte); larger requests take its global lock.
  constexpr size_t kThreadLocalMax = 25 * 16 - 1;
  void* p = threaded_ && bytes > kThreadLocalMax
                ? withCollectorGate([&] { return GC_MALLOC_ATOMIC(bytes); })
                : GC_MALLOC_ATOMIC(bytes);
  if (!p) throw std::bad_alloc();
  return p;
}

void EvalState::copyContext(const Value& v, Context& ctx) {
  if (v.type == VType::kString && v.str.context)
    for (const char** p = v.str.context; *p; ++p) ctx.insert(*p);
}

void EvalState::mkPos(Value& v, PosIdx pos) {
  if (pos == kNoPos) {
    v.mkNull();
    return;
  }
  Pos p = positions.get(pos);
  Bindings* b = allocBindings(3);
  Value* f = allocValue();
  mkString(*f, positions.origin(p.origin).path);
  Value* l = allocValue();
  l->mkInt(p.line);
  Value* c = allocValue();
  c->mkInt(p.column);
  b->push(sFile, f);
  b->push(sLine, l);
  b->push(sColumn, c);
  mkAttrs(v, b);
}

void EvalState::throwError(PosIdx pos, const std::string& msg) {
  throw EvalError(msg + positions.snippet(pos));
}

void EvalState::throwTypeError(PosIdx pos, const char* expected, const Value& v) {
  throwError(pos, std::string("value is ") + showType(v) + " while " + expected + " was expected");
}

std::vector<const Attr*> EvalState::sortedByName(const Bindings* b) const {
  std::vector<const Attr*> out;
  out.reserve(b->size);
  for (auto& a : *b) out.push_back(&a);
  std::sort(out.begin(), out.end(), [this](const Attr* x, const Attr* y) {
    return symbols.name(x->name) < symbols.name(y->name);
  });
  return out;
}

void EvalState::forceThunk(Value& v, PosIdx pos) {
  if (threaded_) return forceThunkThreaded(v, pos);
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
      callFunction(*l, *r, v, pos);
    } catch (...) {
      v.mkApp(l, r);
      throw;
    }
  } else if (v.type == VType::kBlackhole) {
    throw InfiniteRecursionError("infinite recursion encountered" + positions.snippet(pos));
  }
}

int64_t EvalState::forceInt(Value& v, PosIdx pos) {
  forceValue(v, pos);
  if (v.type != VType::kInt) throwTypeError(pos, "an integer", v);
  return v.integer;
}

double EvalState::forceFloat(Value& v, PosIdx pos) {
  forceValue(v, pos);
  if (v.type == VType::kInt) return static_cast<double>(v.integer);
  if (v.type != VType::kFloat) throwTypeError(pos, "a float", v);
  return v.fpoint;
}

bool EvalState::forceBool(Value& v, PosIdx pos) {
  forceValue(v, pos);
  if (v.type != VType::kBool) throwTypeError(pos, "a Boolean", v);
  return v.boolean;
}

void EvalState::forceAttrs(Value& v, PosIdx pos) {
  forceValue(v, pos);
  if (v.type != VType::kAttrs) throwTypeError(pos, "a set", v);
}

void EvalState::forceList(Value& v, PosIdx pos) {
  forceValue(v, pos);
  if (v.type != VType::kList) throwTypeError(pos, "a list", v);
}

void EvalState::forceFunction(Value& v, PosIdx pos) {
  forceValue(v, pos);
  if (!v.isFunction() && !(v.type == VType::kAttrs && v.attrs->find(sFunctor)))
    throwTypeError(pos, "a function", v);
}

std::string_view EvalState::forceString(Value& v, PosIdx pos) {
  forceValue(v, pos);
  if (v.type != VType::kString) throwTypeError(pos, "a string", v);
  return v.str.s;
}

std::string_view EvalState::forceString(Value& v, Context& ctx, PosIdx pos) {
  std::string_view s = forceString(v, pos);
  copyContext(v, ctx);
  return s;
}

std::string_view EvalState::forceStringNoCtx(Value& v, PosIdx pos) {
  std::string_view s = forceString(v, pos);
  if (v.str.context && *v.str.context)
    throwError(pos, "the string '" + std::string(s) +
                        "' is not allowed to refer to a store path (such as '" +
                        std::string(*v.str.context) + "')");
  return s;
}

bool EvalState::evalBool(Env& env, Expr* e, PosIdx pos) {
  Value v;
  e->eval(*this, env, v);
  if (v.type != VType::kBool) throwTypeError(e->pos ? e->pos : pos, "a Boolean", v);
  return v.boolean;
}

void EvalState::evalAttrs(Env& env, Expr* e, Value& v) {
  e->eval(*this, env, v);
  if (v.type != VType::kAttrs) throwTypeError(e->pos, "a set", v);
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

void EvalState::callFunction(Value& fun, size_t nargs, Value** args, Value& vRes, PosIdx pos) {
  uint32_t& d = depth();
  if (++d > settings.maxCallDepth) {
    --d;
    throw InfiniteRecursionError("stack overflow; max-call-depth exceeded (" +
                                 std::to_string(settings.maxCallDepth) +
                                 " nested calls; possible infinite recursion)" +
                                 positions.snippet(pos));
  }
  DepthGuard guard{d};
  forceValue(fun, pos);  // in place: a copy of a shared thunk could be torn
  Value vCur = fun;
  while (nargs > 0) {
    if (vCur.type == VType::kLambda) {
      ExprLambda& lambda = *vCur.lambda.fun;
      Env& env2 = allocEnv(lambda.envSize());
      env2.up = vCur.lambda.env;
      uint32_t displ = 0;
      if (!lambda.formals) {
        env2.values[displ++] = args[0];
      } else {
        Value& arg = *args[0];
        forceValue(arg, pos);
        if (arg.type != VType::kAttrs)
          throwError(pos, lambdaName(*this, lambda) + " called with " + showType(arg) +
                              " while a set was expected");
        if (lambda.arg) env2.values[displ++] = args[0];
        size_t used = 0;
        for (auto& f : lambda.formals->formals) {
          Value* j = arg.attrs->get(f.name);
          if (j) {
            ++used;
            env2.values[displ++] = j;
          } else if (f.def) {
            env2.values[displ++] = f.def->maybeThunk(*this, env2);
          } else {
            throwError(pos, lambdaName(*this, lambda) + " called without required argument '" +
                                std::string(symbols.name(f.name)) + "'");
          }
        }
        if (!lambda.formals->ellipsis && used != arg.attrs->size)
          for (auto& a : *arg.attrs)
            if (!lambda.formals->find(a.name))
              throwError(pos, lambdaName(*this, lambda) + " called with unexpected argument '" +
                                  std::string(symbols.name(a.name)) + "'");
      }
      if (nargs == 1) {
        evalBody(*this, lambda, env2, vRes, pos);
        return;
      }
      Value tmp;
      evalBody(*this, lambda, env2, tmp, pos);
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
        Value* left = allocValue();
        *left = vCur;
        for (size_t i = 0; i + 1 < nargs; ++i) {
          Value* next = allocValue();
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
        p->fn(*this, pos, all, vRes);
        return;
      }
      Value tmp;
      p->fn(*this, pos, all, tmp);
      vCur = tmp;
      nargs -= need;
      args += need;
    } else if (vCur.type == VType::kAttrs && vCur.attrs->find(sFunctor)) {
      Value* functor = vCur.attrs->get(sFunctor);
      Value* self = allocValue();
      *self = vCur;
      Value* args2[2] = {self, args[0]};
      Value tmp;
      callFunction(*functor, 2, args2, tmp, pos);
      vCur = tmp;
      --nargs;
      ++args;
    } else {
      throwError(pos, std::string("attempt to call something which is not a function but ") +
                          showType(vCur));
    }
  }
  vRes = vCur;
}

void EvalState::autoCallFunction(Bindings* args, Value& fun, Value& res) {
  forceValue(fun, kNoPos);
  if (fun.type == VType::kAttrs && fun.attrs->find(sFunctor)) {
    Value* self = allocValue();
    *self = fun;
    Value v2;
    callFunction(*fun.attrs->get(sFunctor), *self, v2, kNoPos);
    forceValue(v2, kNoPos);
    autoCallFunction(args, v2, res);
    return;
  }
  if (fun.type != VType::kLambda || !fun.lambda.fun->formals) {
    res = fun;
    return;
  }
  Formals* formals = fun.lambda.fun->formals;
  Bindings* b = allocBindings(formals->ellipsis ? args->size : formals->formals.size());
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
  Value* arg = allocValue();
  mkAttrs(*arg, b);
  callFunction(fun, *arg, res, kNoPos);
}

void EvalState::eval(Expr* e, Value& v) { e->eval(*this, *baseEnv, v); }

}  // namespace kiln::eval
