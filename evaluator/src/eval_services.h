#pragma once
// The services the evaluator's own code (expressions, builtins, printers)
// uses on an EvalState: forcing to a type, coercion to strings and paths,
// equality and ordering, calls, `//`, string contexts, errors.
// Evaluator-internal: callers outside the evaluator use only
// kiln/evaluator/eval_state.h (eval, forceValue, forceValueDeep,
// autoCallFunction). Defined in eval_state.cc, coerce.cc and
// layered_bindings.cc.

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {

/// The context of a string built from parts. While at most one distinct
/// context array has been added it is kept as it is (no set, no copy: most
/// strings get their context from one interpolated part); a second one
/// switches to a Context.
class ContextUnion {
 public:
  /// Adds a NULL-terminated context array (nullptr: none).
  void add(const char** c);
  /// Adds every entry of `ctx`.
  void add(const Context& ctx);
  /// Whether nothing with a context was added.
  bool empty() const { return !single_ && set_.empty(); }
  /// The union as a NULL-terminated array: the one array added, or a new
  /// one from `state`'s heap (EvalHeap::allocContext); nullptr when empty.
  const char** result(EvalState& state) const;

 private:
  const char** single_ = nullptr;
  Context set_;
};

// ---- forcing to a type (throw a type error otherwise) ----
/// Forces `v` and returns its integer.
int64_t forceInt(EvalState& st, Value& v, PosIdx pos);
/// Forces `v` and returns it as a float (an integer converts).
double forceFloat(EvalState& st, Value& v, PosIdx pos);
/// Forces `v` and returns its Boolean.
bool forceBool(EvalState& st, Value& v, PosIdx pos);
/// Forces `v`, which must be a set.
void forceAttrs(EvalState& st, Value& v, PosIdx pos);
/// Forces `v`, which must be a list.
void forceList(EvalState& st, Value& v, PosIdx pos);
/// Forces `v`, which must be callable (a function or a set with __functor).
void forceFunction(EvalState& st, Value& v, PosIdx pos);
/// Forces `v` and returns its string (context ignored).
std::string_view forceString(EvalState& st, Value& v, PosIdx pos);
/// The same, adding the string's context to `ctx`.
std::string_view forceString(EvalState& st, Value& v, Context& ctx, PosIdx pos);
/// The same, refusing a string with a context.
std::string_view forceStringNoCtx(EvalState& st, Value& v, PosIdx pos);
/// Evaluates `e` in `env` to a Boolean.
bool evalBool(EvalState& st, Env& env, Expr* e, PosIdx pos);
/// Evaluates `e` in `env` to a set.
void evalAttrs(EvalState& st, Env& env, Expr* e, Value& v);

// ---- calls ----
/// Applies `fun` to `nargs` arguments, result in `v`. `loneEnvs`: the
/// lambdas' environments it makes are objects of their own
/// (EvalHeap::allocEnv's `lone`), for a caller whose arguments soon die.
void callFunction(EvalState& st, Value& fun, size_t nargs, Value** args,
                  Value& v, PosIdx pos, bool loneEnvs = false);
/// Applies `fun` to one argument.
inline void callFunction(EvalState& st, Value& fun, Value& arg, Value& v, PosIdx pos) {
  Value* a = &arg;
  callFunction(st, fun, 1, &a, v, pos);
}

// ---- coercion, equality, ordering ----
/// Nix's coerceToString: strings, paths (copied to the store unless
/// `copyToStore` is false), sets with __toString or outPath, and with
/// `coerceMore` Booleans, null, numbers and lists.
std::string coerceToString(EvalState& st, PosIdx pos, Value& v, Context& ctx,
                           bool coerceMore = false, bool copyToStore = true,
                           bool canonicalizePath = true);
/// Appends coerceToString(v) to `out` and its context to `ctx`, without
/// copies for strings and derivations (sets with a string `outPath`).
void appendCoerced(EvalState& st, PosIdx pos, Value& v, std::string& out, ContextUnion& ctx,
                   bool coerceMore = false, bool copyToStore = true,
                   bool canonicalizePath = true);
/// A path from a path value or an absolute string; throws otherwise.
std::string coerceToPath(EvalState& st, PosIdx pos, Value& v, Context& ctx);
/// Copies (or in read-only mode, names) a source path in the store.
std::string copyPathToStore(EvalState& st, Context& ctx, const std::string& path);
/// Nix's `==`.
bool eqValues(EvalState& st, Value& a, Value& b);
/// Whether `v` is a set whose `type` is "derivation".
bool isDerivation(EvalState& st, Value& v);
/// Compares for sort/lessThan; throws for incomparable types.
bool lessThan(EvalState& st, Value& a, Value& b, PosIdx pos);

// ---- sets and contexts ----
/// `left // right`, the right side's attributes winning. A layered set
/// (value.h) on left's base when the result's own attributes would be few
/// next to the base's, else a flat copy (layered_bindings.cc).
Bindings* updateBindings(EvalState& st, const Bindings& left, const Bindings& right);
/// The same with the right side an array sorted by name, names distinct.
Bindings* updateBindings(EvalState& st, const Bindings& left, const Attr* right,
                         const Attr* rightEnd);
/// A layer on `base` holding [right, rightEnd) (sorted, distinct names),
/// whatever the sizes, for a base that stays live anyway (so a copy would
/// only duplicate it); updateBindings when `base` has its most layers.
Bindings* layerBindings(EvalState& st, const Bindings& base, const Attr* right,
                        const Attr* rightEnd);
/// Makes `v` the set {file, line, column} of `pos` (null for no position).
void mkPos(EvalState& st, Value& v, PosIdx pos);
/// A context entry: an arena copy of the concatenation of `parts`, laid
/// out after a one-entry context array of itself ({entry, nullptr}, which
/// singleContext returns), so that a string whose context is this one entry
/// needs no array of its own. Every context entry is made here (addContext,
/// derivationStrict's `=` and `!out!` entries): a Context holds only these.
const char* makeContextEntry(Arena& arena, std::initializer_list<std::string_view> parts);
/// The one-entry context array {entry, nullptr} before `entry`, a text
/// makeContextEntry made.
inline const char** singleContext(const char* entry) {
  return reinterpret_cast<const char**>(const_cast<char*>(entry)) - 2;
}
/// Adds `s` to `ctx` (an arena copy: makeContextEntry).
inline void addContext(EvalState& st, Context& ctx, std::string_view s) {
  ctx.insert(makeContextEntry(st.arena, {s}));
}
/// Makes `v` the store path `path` with the path itself as its context
/// (toFile, path, filterSource): the string is the context entry's own
/// text, with its one-entry array; no collectable string or array.
void mkStorePathString(EvalState& st, Value& v, std::string_view path);
/// Copies a value's context into `ctx`.
void copyContext(const Value& v, Context& ctx);

// ---- errors ----
/// Throws EvalError(`msg` and the position's snippet).
[[noreturn]] void throwError(EvalState& st, PosIdx pos, const std::string& msg);
/// Throws "value is X while `expected` was expected".
[[noreturn]] void throwTypeError(EvalState& st, PosIdx pos, const char* expected, const Value& v);
/// Attributes of a set sorted by name (the order Nix shows them in).
std::vector<const Attr*> sortedByName(EvalState& st, const Bindings* b);

}  // namespace kiln::eval
