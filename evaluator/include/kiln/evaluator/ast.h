#pragma once
/// The Nix abstract syntax tree. Nodes are arena-allocated by the parser;
/// variables are resolved to (level, displacement) by bindVars() so that
/// evaluation never searches names, except through `with`.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <new>
#include <ostream>
#include <span>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "kiln/evaluator/value.h"

namespace kiln::eval {

struct StaticEnv;

/// Base of all expressions. Nodes are kept for the whole evaluation (a
/// package set's 50,000 files make millions), so each is laid out small:
/// a derived node's first 4-byte member fills the base's padding after
/// `pos` (the element count of a fixed array the node points to, in the
/// arena), and arrays that grow while parsing are ArenaVecs.
struct Expr {
  /// The few kinds the parser and calls ask about (exprAs): one virtual
  /// call, where dynamic_cast compared type names. (Not a field: derived
  /// nodes keep their first field in the 4 bytes after `pos`.)
  enum class Kind : uint8_t { kOther, kConst, kConstList, kAttrs, kLambda };
  PosIdx pos = kNoPos;
  virtual ~Expr() = default;
  virtual Kind kind() const { return Kind::kOther; }
  /// Evaluates into `v` (weak head normal form).
  virtual void eval(EvalState& state, Env& env, Value& v) = 0;
  /// A value for this expression without evaluating it: a thunk, or the
  /// value itself for constants and resolved variables.
  virtual Value* maybeThunk(EvalState& state, Env& env);
  /// Resolves variables against `env`; throws ParseError for unbound ones.
  virtual void bindVars(EvalState& state, const StaticEnv& env) = 0;
  /// Prints the expression in Nix's `--parse` style.
  virtual void show(const SymbolTable& st, std::ostream& out) const = 0;
  /// Whether eval() in an environment may leave something referring to it
  /// (a thunk, a closure, an environment under it) once it returns (after
  /// bindVars; capture.cc). True unless a node knows better.
  virtual bool capturesEnv() const { return true; }
  /// Whether maybeThunk() in an environment may make a thunk referring to it.
  virtual bool thunkCapturesEnv() const { return true; }
};

/// A constant: integer, float, string without context, or path.
struct ExprConst : Expr {
  static constexpr Kind kKind = Kind::kConst;
  Kind kind() const override { return kKind; }
  Value v;
  void eval(EvalState& state, Env& env, Value& out) override { out = v; }
  Value* maybeThunk(EvalState&, Env&) override { return &v; }
  void bindVars(EvalState&, const StaticEnv&) override {}
  void show(const SymbolTable& st, std::ostream& out) const override;
  bool capturesEnv() const override { return false; }
  bool thunkCapturesEnv() const override { return false; }
};

struct ExprVar : Expr {
  Symbol name;
  uint32_t level = 0;
  uint32_t displ = 0;  ///< kFromWith: looked up in the `with` sets
  static constexpr uint32_t kFromWith = UINT32_MAX;
  /// Whether the variable is not in a static scope but in a `with` set.
  bool fromWith() const { return displ == kFromWith; }
  void eval(EvalState& state, Env& env, Value& v) override;
  Value* maybeThunk(EvalState& state, Env& env) override;
  void bindVars(EvalState& state, const StaticEnv& env) override;
  void show(const SymbolTable& st, std::ostream& out) const override;
  bool capturesEnv() const override { return false; }
  /// A variable of a `with` may need a thunk to look it up later.
  bool thunkCapturesEnv() const override { return fromWith(); }
};

/// One element of an attribute path: a static name or a dynamic expression.
struct AttrName {
  Symbol symbol;          ///< set when static
  Expr* expr = nullptr;   ///< set when dynamic
};
/// An attribute path as the parser collects it.
using AttrPath = boost::container::small_vector<AttrName, 4>;

/// A copy of `n` elements at `p` in `arena` (nullptr for none), its count
/// in `count`: the array of a node that keeps the count itself.
template <class T>
T* arenaArray(Arena& arena, const T* p, size_t n, uint32_t& count) {
  count = static_cast<uint32_t>(n);
  if (n == 0) return nullptr;
  T* a = static_cast<T*>(arena.allocate(sizeof(T) * n, alignof(T)));
  std::uninitialized_copy_n(p, n, a);
  return a;
}

/// A node's Expr* elements (its count kept by the node): one is kept in
/// place of the pointer to an array (`[ x ]`: no 8-byte array in the
/// arena), more in an array in the arena.
union ExprItems {
  Expr** many = nullptr;
  Expr* one;
  /// Sets the `n` elements at `p`, their count in `count`.
  void assign(Arena& arena, Expr* const* p, size_t n, uint32_t& count) {
    if (n == 1) {
      one = p[0];
      count = 1;
      return;
    }
    many = arenaArray(arena, p, n, count);
  }
  /// The elements, `n` of them.
  std::span<Expr*> span(uint32_t n) const {
    return {n == 1 ? const_cast<Expr**>(&one) : many, n};
  }
};

struct ExprSelect : Expr {
  /// The path's length, kHasDefault set when an `or` default follows it.
  uint32_t pathBits = 0;
  Expr* e = nullptr;
  /// A path of one name without a default (most selects: `lib.x`,
  /// `self.y`, `inherit (s) z;`) is kept in the node itself; any other in
  /// an array in the arena, the default after it (as an AttrName's expr).
  union {
    AttrName* pathItems = nullptr;
    alignas(AttrName) std::byte oneName[sizeof(AttrName)];  // an AttrName
  };
  static constexpr uint32_t kHasDefault = uint32_t{1} << 31;
  /// Sets the path and the `or` default (nullptr: none).
  void setPath(Arena& arena, std::span<const AttrName> path, Expr* def) {
    if (path.size() == 1 && !def) {
      new (oneName) AttrName(path[0]);
      pathBits = 1;
      return;
    }
    pathBits = static_cast<uint32_t>(path.size());
    pathItems = static_cast<AttrName*>(arena.allocate(
        sizeof(AttrName) * (path.size() + (def ? 1 : 0)), alignof(AttrName)));
    std::uninitialized_copy_n(path.data(), path.size(), pathItems);
    if (def) {
      new (&pathItems[path.size()]) AttrName{Symbol(), def};
      pathBits |= kHasDefault;
    }
  }
  std::span<AttrName> path() const {
    return {pathBits == 1 ? std::launder(reinterpret_cast<AttrName*>(
                                const_cast<std::byte*>(oneName)))
                          : pathItems,
            pathBits & ~kHasDefault};
  }
  /// The `or` default, or nullptr.
  Expr* orDefault() const {
    return pathBits & kHasDefault ? pathItems[pathBits & ~kHasDefault].expr
                                  : nullptr;
  }
  void eval(EvalState& state, Env& env, Value& v) override;
  void bindVars(EvalState& state, const StaticEnv& env) override;
  void show(const SymbolTable& st, std::ostream& out) const override;
  bool capturesEnv() const override;
};

/// `x.a`: a select of one static name, without `or`, from a variable
/// (`lib.x`, `self.pkg`, `stdenv.mkDerivation`: most selects in a package
/// set) in one 32-byte node, where an ExprSelect (40) and its ExprVar (24)
/// took 64. Made by the parser only where the select and the variable
/// start at the same position, so errors point where they did; it binds as
/// its variable does and evaluates as the select of that variable would.
struct ExprSelectVar : ExprVar {
  Symbol attr;  ///< the name selected
  void eval(EvalState& state, Env& env, Value& v) override;
  /// A thunk, as any select (not the variable's value, as ExprVar's).
  Value* maybeThunk(EvalState& state, Env& env) override { return Expr::maybeThunk(state, env); }
  void show(const SymbolTable& st, std::ostream& out) const override;
  /// Evaluated, it keeps nothing (as ExprVar); its thunk refers to the
  /// environment (unlike ExprVar's value).
  bool capturesEnv() const override { return false; }
  bool thunkCapturesEnv() const override { return true; }
};

struct ExprOpHasAttr : Expr {
  uint32_t nPath = 0;
  Expr* e = nullptr;
  AttrName* pathItems = nullptr;
  std::span<AttrName> path() const { return {pathItems, nPath}; }
  void eval(EvalState& state, Env& env, Value& v) override;
  void bindVars(EvalState& state, const StaticEnv& env) override;
  void show(const SymbolTable& st, std::ostream& out) const override;
  bool capturesEnv() const override;
};

struct ExprAttrs : Expr {
  static constexpr Kind kKind = Kind::kAttrs;
  Kind kind() const override { return kKind; }
  /// 16 bytes: positions fit in 31 bits (PosTable keeps them below
  /// kMaxPosIdx), the 32nd says whether the attribute was inherited.
  struct AttrDef {
    Symbol name;
    PosIdx pos : 31;
    PosIdx inherited : 1;
    Expr* e;
  };
  struct DynamicAttrDef {
    Expr* nameExpr;
    Expr* valueExpr;
    PosIdx pos;
  };
  bool recursive = false;
  /// Set by bindVars for a set whose every value is a constant or a
  /// resolved variable (`{ inherit config; }`, `{ x = 1; }`): nothing in it
  /// evaluates anything, so maybeThunk makes the set at once and returns a
  /// thunk of it that keeps no environment alive (a thunk of the
  /// expression kept the whole scope it was written in: `passthru = {
  /// inherit config; }` kept every binding of a package's `let`).
  bool builtAtOnce = false;
  /// In symbol order once bound (bindVars sorts them). While the parser
  /// adds to them they are malloc'd (ArenaVec::pushMalloc); it moves them
  /// into the arena when the file is parsed.
  ArenaVec<AttrDef> attrs;
  ArenaVec<DynamicAttrDef> dynamicAttrs;
  void eval(EvalState& state, Env& env, Value& v) override;
  /// `{ }`: the state's empty set itself, no thunk; a set builtAtOnce: a
  /// thunk of the set made now (still a thunk: `--eval` prints <CODE>).
  Value* maybeThunk(EvalState& state, Env& env) override;
  /// Whether this is `{ }` or `rec { }`: it evaluates to the state's empty set.
  bool emptyLiteral() const { return attrs.empty() && dynamicAttrs.empty(); }
  void bindVars(EvalState& state, const StaticEnv& env) override;
  void show(const SymbolTable& st, std::ostream& out) const override;
  bool capturesEnv() const override;
  bool thunkCapturesEnv() const override { return !emptyLiteral(); }
  /// Binds the attribute bodies in the recursive scope `env` (used by let).
  void bindBodies(EvalState& state, const StaticEnv& outer, const StaticEnv& inner);
};

struct ExprList : Expr {
  uint32_t nElems = 0;
  ExprItems elemItems;
  std::span<Expr*> elems() const { return elemItems.span(nElems); }
  void eval(EvalState& state, Env& env, Value& v) override;
  void bindVars(EvalState& state, const StaticEnv& env) override;
  void show(const SymbolTable& st, std::ostream& out) const override;
  bool capturesEnv() const override;
};

/// A list literal of constants only (Parser::constantList): its elements
/// are the constants' own values, in an array made when parsing right
/// after the node (no Value in it: 24 bytes and 8 an element, where a
/// node holding its list value took 40), so every evaluation shares them
/// (lists are immutable) and allocates no array. Like any list literal, it
/// is a thunk until forced.
struct ExprConstList : Expr {
  static constexpr Kind kKind = Kind::kConstList;
  Kind kind() const override { return kKind; }
  uint32_t size = 0;  ///< the element count (in the base's padding)
  /// The list as one value, made on first use (sharedValue) and kept.
  Value* shared = nullptr;
  /// The elements, right after the node (Parser::constantList).
  Value** elems() const {
    return reinterpret_cast<Value**>(const_cast<ExprConstList*>(this) + 1);
  }
  /// The list as a value that lives as long as the AST, made once: passed
  /// as it is to the builtins that force it (PrimOp::forcedLists), with no
  /// thunk to allocate. Thread-safe.
  Value* sharedValue(EvalState& state) {
    if (Value* v = __atomic_load_n(&shared, __ATOMIC_ACQUIRE)) return v;
    return makeShared(state);
  }
  void eval(EvalState&, Env&, Value& out) override { out.mkList(size, elems()); }
  /// Makes `shared` (sharedValue's first call).
  Value* makeShared(EvalState& state);
  void bindVars(EvalState&, const StaticEnv&) override {}
  void show(const SymbolTable& st, std::ostream& out) const override;
  bool capturesEnv() const override { return false; }
};

struct Formal {
  PosIdx pos;
  Symbol name;
  Expr* def;
};

struct Formals {
  ArenaVec<Formal> formals;  ///< sorted by symbol id after parsing
  bool ellipsis = false;
  /// `builtins.functionArgs` of this function, made on first use and
  /// shared by every later call (sets are immutable; its values are the
  /// static true and false): callPackage asks it of every package.
  std::atomic<Bindings*> argsSet{nullptr};
  const Formal* find(Symbol s) const {
    for (auto& f : formals)
      if (f.name == s) return &f;
    return nullptr;
  }
};

struct ExprLambda : Expr {
  static constexpr Kind kKind = Kind::kLambda;
  Kind kind() const override { return kKind; }
  Symbol arg;                  ///< the `x:` or `@x` name, if any
  Formals* formals = nullptr;  ///< the `{ a, b }` pattern, if any
  Expr* body = nullptr;
  Symbol name;                 ///< name of the binding it was defined in
  /// When nothing a call leaves behind refers to its environment, the
  /// fewest arguments a call must pass for that (set by bindVars:
  /// capture.cc), and callFunction makes the environment on the C++ stack
  /// instead of the heap: 1 when the body captures nothing, 2 for `a: b:
  /// body` where `b: body` is 1 (the closure `b: body` is the only thing
  /// made in `a`'s environment, and when both arguments are passed at once
  /// it is applied and dropped at once); 0: always on the heap. In the
  /// padding after `name`.
  uint8_t stackEnvArgs = 0;
  /// Set by ExprCall::bindVars when the lambda is a call's argument
  /// (`map (d: f d) deps`, a fold's step): maybeThunk then makes its thunk
  /// in an object of its own (EvalHeap::allocLoneValue), not in a block
  /// of three. Forced, such a thunk is a closure holding its environment,
  /// and once the call is done it is garbage, but a dead one beside a live
  /// neighbour kept that environment and all it reaches. (Lambdas bound to
  /// names mostly live on: packed, as other values.)
  bool loneThunk = false;
  /// The most slots of an environment made on the stack.
  static constexpr uint32_t kMaxStackEnv = 4;
  /// The most stack environments of one call (stackEnvArgs' bound).
  static constexpr uint8_t kMaxStackEnvs = 2;
  /// A thunk, in an object of its own when loneThunk.
  Value* maybeThunk(EvalState& state, Env& env) override;
  void eval(EvalState& state, Env& env, Value& v) override;
  void bindVars(EvalState& state, const StaticEnv& env) override;
  void show(const SymbolTable& st, std::ostream& out) const override;
  /// Slots the call environment needs.
  uint32_t envSize() const { return (arg ? 1 : 0) + (formals ? formals->formals.size() : 0); }
};

/// ExprLambda::stackEnvArgs of `l` (capture.cc), once `l` and its body
/// are bound.
uint8_t stackEnvArgsOf(const ExprLambda& l);

/// `fun args…`: its arguments in an array right after the node (24
/// bytes and 8 an argument; a pointer to an array apart took 8 more).
struct ExprCall : Expr {
  uint32_t nArgs = 0;
  Expr* fun = nullptr;
  /// A call of `fun` on `args` at `pos`, made in `arena`.
  static ExprCall* make(Arena& arena, PosIdx pos, Expr* fun, std::span<Expr* const> args);
  /// The arguments, right after the node.
  Expr** argItems() const { return reinterpret_cast<Expr**>(const_cast<ExprCall*>(this) + 1); }
  std::span<Expr*> args() const { return {argItems(), nArgs}; }
  void eval(EvalState& state, Env& env, Value& v) override;
  void bindVars(EvalState& state, const StaticEnv& env) override;
  void show(const SymbolTable& st, std::ostream& out) const override;
  bool capturesEnv() const override;
};

struct ExprLet : Expr {
  ExprAttrs* attrs = nullptr;
  Expr* body = nullptr;
  void eval(EvalState& state, Env& env, Value& v) override;
  void bindVars(EvalState& state, const StaticEnv& env) override;
  void show(const SymbolTable& st, std::ostream& out) const override;
};

struct ExprWith : Expr {
  Expr* attrs = nullptr;
  Expr* body = nullptr;
  uint32_t prevWith = 0;
  void eval(EvalState& state, Env& env, Value& v) override;
  void bindVars(EvalState& state, const StaticEnv& env) override;
  void show(const SymbolTable& st, std::ostream& out) const override;
};

struct ExprIf : Expr {
  Expr* cond = nullptr;
  Expr* then = nullptr;
  Expr* else_ = nullptr;
  void eval(EvalState& state, Env& env, Value& v) override;
  void bindVars(EvalState& state, const StaticEnv& env) override;
  void show(const SymbolTable& st, std::ostream& out) const override;
  bool capturesEnv() const override;
};

struct ExprAssert : Expr {
  Expr* cond = nullptr;
  Expr* body = nullptr;
  void eval(EvalState& state, Env& env, Value& v) override;
  void bindVars(EvalState& state, const StaticEnv& env) override;
  void show(const SymbolTable& st, std::ostream& out) const override;
  bool capturesEnv() const override;
};

struct ExprOpNot : Expr {
  Expr* e = nullptr;
  void eval(EvalState& state, Env& env, Value& v) override;
  void bindVars(EvalState& state, const StaticEnv& env) override;
  void show(const SymbolTable& st, std::ostream& out) const override;
  bool capturesEnv() const override;
};

/// Binary operators that are not desugared into builtin calls.
struct ExprBinOp : Expr {
  enum Op : uint8_t { kEq, kNEq, kAnd, kOr, kImpl, kUpdate, kConcatLists };
  Op op;
  Expr* e1 = nullptr;
  Expr* e2 = nullptr;
  void eval(EvalState& state, Env& env, Value& v) override;
  void bindVars(EvalState& state, const StaticEnv& env) override;
  void show(const SymbolTable& st, std::ostream& out) const override;
  bool capturesEnv() const override;
};

/// One part of a concatenation: an expression, or the literal text of an
/// interpolated string or path, which needs no node of its own.
struct StringPart {
  PosIdx pos = kNoPos;
  bool literal = false;  ///< `text`, not `expr`
  /// `text`'s length, or kLongText for one of 65535 bytes or more (in
  /// what would be padding).
  uint16_t textLen = 0;
  static constexpr uint16_t kLongText = UINT16_MAX;
  union {
    Expr* expr = nullptr;
    const char* text;  ///< NUL-terminated, in the arena
  };
  /// A literal part's text, without strlen (but for kLongText).
  std::string_view literalText() const {
    return textLen != kLongText ? std::string_view(text, textLen) : std::string_view(text);
  }
};

/// `a + b` (forceString = false) and string interpolation (true).
struct ExprConcatStrings : Expr {
  bool forceString = false;
  ArenaVec<StringPart> parts;
  void eval(EvalState& state, Env& env, Value& v) override;
  void bindVars(EvalState& state, const StaticEnv& env) override;
  void show(const SymbolTable& st, std::ostream& out) const override;
  bool capturesEnv() const override;
};

/// `__curPos`.
struct ExprPos : Expr {
  void eval(EvalState& state, Env& env, Value& v) override;
  void bindVars(EvalState&, const StaticEnv&) override {}
  void show(const SymbolTable& st, std::ostream& out) const override;
  bool capturesEnv() const override { return false; }
};

// No node owns memory (arrays are ArenaVecs): the arena need not destroy
// them (their destructor is the empty virtual one).
template <> inline constexpr bool kArenaDestroys<ExprConst> = false;
template <> inline constexpr bool kArenaDestroys<ExprSelect> = false;
template <> inline constexpr bool kArenaDestroys<ExprSelectVar> = false;
template <> inline constexpr bool kArenaDestroys<ExprOpHasAttr> = false;
template <> inline constexpr bool kArenaDestroys<ExprAttrs> = false;
template <> inline constexpr bool kArenaDestroys<ExprList> = false;
template <> inline constexpr bool kArenaDestroys<ExprConstList> = false;
template <> inline constexpr bool kArenaDestroys<Formals> = false;
template <> inline constexpr bool kArenaDestroys<ExprCall> = false;
template <> inline constexpr bool kArenaDestroys<ExprConcatStrings> = false;
template <> inline constexpr bool kArenaDestroys<ExprVar> = false;
template <> inline constexpr bool kArenaDestroys<ExprLambda> = false;
template <> inline constexpr bool kArenaDestroys<ExprLet> = false;
template <> inline constexpr bool kArenaDestroys<ExprWith> = false;
template <> inline constexpr bool kArenaDestroys<ExprIf> = false;
template <> inline constexpr bool kArenaDestroys<ExprAssert> = false;
template <> inline constexpr bool kArenaDestroys<ExprOpNot> = false;
template <> inline constexpr bool kArenaDestroys<ExprBinOp> = false;
template <> inline constexpr bool kArenaDestroys<ExprPos> = false;

// Sizes the layout above is meant to keep (x86-64): a change that grows a
// node costs megabytes on a large package set.
static_assert(sizeof(ExprVar) == 24 && sizeof(ExprConst) == 40 &&
              sizeof(ExprSelect) == 40 && sizeof(ExprSelectVar) == 32 &&
              sizeof(ExprAttrs) == 32 && sizeof(ExprAttrs::AttrDef) == 16 &&
              sizeof(ExprList) == 24 && sizeof(ExprConstList) == 24 &&
              sizeof(ExprCall) == 24 && sizeof(ExprOpHasAttr) == 32 &&
              sizeof(ExprLambda) == 40 && sizeof(ExprConcatStrings) == 24 &&
              sizeof(StringPart) == 16);

/// `e` as a T (ExprConst, ExprConstList, ExprAttrs or ExprLambda), or
/// null: a dynamic_cast by the kind tag.
template <class T>
T* exprAs(Expr* e) {
  return e && e->kind() == T::kKind ? static_cast<T*>(e) : nullptr;
}

/// A parse-time scope: either a `with` or a list of names with slots.
struct StaticEnv {
  bool isWith = false;
  const StaticEnv* up = nullptr;
  std::vector<std::pair<Symbol, uint32_t>> vars;  ///< sorted by symbol
  void sort() {
    std::sort(vars.begin(), vars.end(), [](auto& a, auto& b) { return a.first < b.first; });
  }
  const std::pair<Symbol, uint32_t>* find(Symbol s) const {
    auto it = std::lower_bound(vars.begin(), vars.end(), s,
                               [](auto& a, Symbol n) { return a.first < n; });
    return it != vars.end() && it->first == s ? &*it : nullptr;
  }
};

}  // namespace kiln::eval
