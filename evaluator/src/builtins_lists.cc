// List builtins.
#include <algorithm>
#include <deque>
#include <set>

#include "gc_support.h"
#include "builtins.h"
#include "eval_parts.h"
#include "list_helpers.h"
#include "print.h"

namespace kiln::eval {

namespace {

bool callPred(EvalState& st, Value& f, Value* x, PosIdx pos) {
  Value r;
  callFunction(st, f, *x, r, pos);
  return forceBool(st, r, pos);
}

void primMap(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceList(st, *args[1], pos);
  size_t n = args[1]->list.size;
  Value** elems = st.heap().allocListOfValues(n);
  for (size_t i = 0; i < n; ++i)
    elems[i]->mkApp(args[0], args[1]->list.elems[i]);
  v.mkList(n, elems);
}

void primFilter(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceFunction(st, *args[0], pos);
  forceList(st, *args[1], pos);
  size_t n = args[1]->list.size;
  Value** elems = args[1]->list.elems;
  Value** out = st.heap().allocList(n);
  size_t k = 0;
  if (n >= ListHelpers::kMinElements && st.threads().listHelpers()) {
    // The predicate's calls on the list helpers, the list made here.
    std::vector<char> keep(n);
    if (parallelFor(st, n, [&](size_t i) { keep[i] = callPred(st, *args[0], elems[i], pos); })) {
      for (size_t i = 0; i < n; ++i)
        if (keep[i]) out[k++] = elems[i];
      v.mkList(k, out);
      return;
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (callPred(st, *args[0], elems[i], pos)) out[k++] = elems[i];
  v.mkList(k, out);
}

void elemAt(EvalState& st, PosIdx pos, Value& list, int64_t n, Value& v) {
  forceList(st, list, pos);
  if (n < 0 || static_cast<size_t>(n) >= list.list.size)
    throwError(st, pos, "list index " + std::to_string(n) + " is out of bounds");
  st.forceValue(*list.list.elems[n], pos);
  v = *list.list.elems[n];
}

void primHead(EvalState& st, PosIdx pos, Value** args, Value& v) { elemAt(st, pos, *args[0], 0, v); }

void primElemAt(EvalState& st, PosIdx pos, Value** args, Value& v) {
  elemAt(st, pos, *args[0], forceInt(st, *args[1], pos), v);
}

void primTail(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceList(st, *args[0], pos);
  if (args[0]->list.size == 0) throwError(st, pos, "'tail' called on an empty list");
  v.mkList(args[0]->list.size - 1, args[0]->list.elems + 1);
}

void primLength(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceList(st, *args[0], pos);
  v.mkInt(static_cast<int64_t>(args[0]->list.size));
}

// foldl' steps whose accumulator and environments are packed as usual
// (see primFoldlStrict).
constexpr size_t kPackedFoldSteps = 8;

void primFoldlStrict(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceFunction(st, *args[0], pos);
  forceList(st, *args[2], pos);
  size_t n = args[2]->list.size;
  if (n == 0) {
    st.forceValue(*args[1], pos);
    v = *args[1];
    return;
  }
  Value* cur = args[1];
  for (size_t i = 0; i < n; ++i) {
    Value* vs[2] = {cur, args[2]->list.elems[i]};
    // A step's accumulator is garbage once the next step is done (unless
    // the function kept it), but packed into blocks, it and the
    // environment holding it would stay as long as anything made beside
    // them during the step: `foldl' (acc: x: acc // f x)` kept every
    // intermediate set live. Alone, they are collected. The first steps
    // stay packed: a short fold (a package's phases, `unique` over its
    // dependencies) keeps little, and objects of their own cost time.
    const bool lone = i >= kPackedFoldSteps;
    Value* next = i + 1 == n ? &v
                  : lone     ? st.heap().allocLoneValue()
                             : st.heap().allocValue();
    callFunction(st, *args[0], 2, vs, *next, pos, lone);
    cur = next;
  }
  st.forceValue(v, pos);
}

void primGenList(EvalState& st, PosIdx pos, Value** args, Value& v) {
  int64_t n = forceInt(st, *args[1], pos);
  if (n < 0) throwError(st, pos, "cannot create list of size " + std::to_string(n));
  // The applications die with the list (allocListOfValues); the indices
  // stay apart: a result that keeps its index would keep the whole list.
  Value** elems = st.heap().allocListOfValues(n);
  for (int64_t i = 0; i < n; ++i) {
    Value* iv = st.heap().allocValue();
    iv->mkInt(i);
    elems[i]->mkApp(args[0], iv);
  }
  v.mkList(n, elems);
}

void primSort(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceFunction(st, *args[0], pos);
  forceList(st, *args[1], pos);
  size_t n = args[1]->list.size;
  st.mkList(v, n);
  for (size_t i = 0; i < n; ++i) {
    v.list.elems[i] = args[1]->list.elems[i];
    st.forceValue(*v.list.elems[i], pos);
  }
  Value& f = *args[0];
  bool builtinLess = f.type == VType::kPrimOp && f.primOp->fn == st.builtins().lookup("lessThan")->primOp->fn;
  std::stable_sort(v.list.elems, v.list.elems + n, [&](Value* a, Value* b) {
    if (builtinLess) return lessThan(st, *a, *b, pos);
    Value* vs[2] = {a, b};
    Value r;
    callFunction(st, f, 2, vs, r, pos);
    return forceBool(st, r, pos);
  });
}

void primConcatLists(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceList(st, *args[0], pos);
  concatLists(st, v, args[0]->list.size, args[0]->list.elems, pos);
}

void primConcatMap(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceFunction(st, *args[0], pos);
  forceList(st, *args[1], pos);
  size_t n = args[1]->list.size;
  Value** lists = st.heap().allocList(n);
  auto call = [&](size_t i) {
    Value* r = st.heap().allocValue();
    callFunction(st, *args[0], *args[1]->list.elems[i], *r, pos);
    lists[i] = r;
  };
  // On the list helpers while a collection's root is evaluated with
  // threads (filterAttrs over a whole package set is a concatMap).
  if (!parallelFor(st, n, call))
    for (size_t i = 0; i < n; ++i) call(i);
  concatLists(st, v, n, lists, pos);
}

void primPartition(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceFunction(st, *args[0], pos);
  forceList(st, *args[1], pos);
  size_t n = args[1]->list.size;
  TracedVector<Value*> right, wrong;
  for (size_t i = 0; i < n; ++i) {
    Value* x = args[1]->list.elems[i];
    st.forceValue(*x, pos);
    (callPred(st, *args[0], x, pos) ? right : wrong).push_back(x);
  }
  auto mk = [&](TracedVector<Value*>& xs) {
    Value* l = st.heap().allocValue();
    st.mkList(*l, xs.size());
    std::copy(xs.begin(), xs.end(), l->list.elems);
    return l;
  };
  Bindings* b = st.heap().allocBindings(2);
  b->push(st.sRight, mk(right));
  b->push(st.sWrong, mk(wrong));
  st.mkAttrs(v, b);
}

void primGroupBy(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceFunction(st, *args[0], pos);
  forceList(st, *args[1], pos);
  TracedHeapVector<std::pair<Symbol, TracedHeapVector<Value*>>> groups;
  std::unordered_map<uint32_t, size_t> index;
  for (size_t i = 0; i < args[1]->list.size; ++i) {
    Value* x = args[1]->list.elems[i];
    Value r;
    callFunction(st, *args[0], *x, r, pos);
    Symbol name = st.sym(forceStringNoCtx(st, r, pos));
    auto it = index.find(name.id);
    if (it == index.end()) {
      index.emplace(name.id, groups.size());
      groups.push_back({name, {x}});
    } else {
      groups[it->second].second.push_back(x);
    }
  }
  Bindings* b = st.heap().allocBindings(groups.size());
  for (auto& [name, xs] : groups) {
    Value* l = st.heap().allocValue();
    st.mkList(*l, xs.size());
    std::copy(xs.begin(), xs.end(), l->list.elems);
    b->push(name, l);
  }
  st.mkAttrs(v, b);
}

void primElem(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceList(st, *args[1], pos);
  for (size_t i = 0; i < args[1]->list.size; ++i)
    if (eqValues(st, *args[0], *args[1]->list.elems[i])) {
      v.mkBool(true);
      return;
    }
  v.mkBool(false);
}

template <bool Any>
void primAnyAll(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceFunction(st, *args[0], pos);
  forceList(st, *args[1], pos);
  for (size_t i = 0; i < args[1]->list.size; ++i)
    if (callPred(st, *args[0], args[1]->list.elems[i], pos) == Any) {
      v.mkBool(Any);
      return;
    }
  v.mkBool(!Any);
}

void primGenericClosure(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceAttrs(st, *args[0], pos);
  Value* startSet = args[0]->attrs->get(st.sStartSet);
  if (!startSet) throwError(st, pos, "attribute 'startSet' required");
  forceList(st, *startSet, pos);
  Value* op = args[0]->attrs->get(st.sOperator);
  if (!op) throwError(st, pos, "attribute 'operator' required");
  st.forceValue(*op, pos);
  TracedDeque<Value*> work(startSet->list.elems, startSet->list.elems + startSet->list.size);
  auto less = [&](Value* a, Value* b) { return lessThan(st, *a, *b, pos); };
  std::set<Value*, decltype(less), traceable_allocator<Value*>> done(less);
  TracedVector<Value*> res;
  while (!work.empty()) {
    Value* e = work.front();
    work.pop_front();
    forceAttrs(st, *e, pos);
    Value* key = e->attrs->get(st.sKey);
    if (!key) throwError(st, pos, "attribute 'key' required");
    st.forceValue(*key, pos);
    if (!done.insert(key).second) continue;
    res.push_back(e);
    Value call;
    callFunction(st, *op, *e, call, pos);
    forceList(st, call, pos);
    for (size_t i = 0; i < call.list.size; ++i) work.push_back(call.list.elems[i]);
  }
  st.mkList(v, res.size());
  std::copy(res.begin(), res.end(), v.list.elems);
}

constexpr BuiltinDef kDefs[] = {
    {"__genericClosure", 1, primGenericClosure},
    {"map", 2, primMap},
    {"__filter", 2, primFilter},
    {"__head", 1, primHead},
    {"__tail", 1, primTail},
    {"__elemAt", 2, primElemAt},
    {"__length", 1, primLength},
    {"__foldl'", 3, primFoldlStrict},
    {"__genList", 2, primGenList},
    {"__sort", 2, primSort},
    {"__concatLists", 1, primConcatLists},
    {"__concatMap", 2, primConcatMap},
    {"__partition", 2, primPartition},
    {"__groupBy", 2, primGroupBy},
    {"__elem", 2, primElem},
    {"__any", 2, primAnyAll<true>},
    {"__all", 2, primAnyAll<false>},
};

}  // namespace

void registerListsBuiltins(EvalState& state) { addBuiltins(state, kDefs); }

}  // namespace kiln::eval
