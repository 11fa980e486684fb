#pragma once
/// The evaluator's runtime values: a compact tagged union (24 bytes) whose
/// payloads (strings, attribute sets, lists, environments) live in the
/// EvalState's arena.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

#include "kiln/evaluator/position.h"
#include "kiln/evaluator/symbol_table.h"

namespace kiln::eval {

struct Expr;
struct ExprLambda;
struct Env;
struct Bindings;
struct PrimOp;
class EvalState;

/// Internal representation tags. kThunk/kApp/kBlackhole are unevaluated.
enum class VType : uint8_t {
  kThunk, kApp, kBlackhole, kInt, kFloat, kBool, kNull, kString, kPath,
  kAttrs, kList, kLambda, kPrimOp, kPrimOpApp
};

/// A Nix value. Trivially copyable; never owns anything.
struct Value {
  VType type = VType::kNull;
  /// While a thread evaluates this thunk in threaded evaluation: its slot
  /// (1-based); 0 otherwise. `type` and `owner` form one 16-bit state word
  /// (valueState/casValueState) that threads read and claim atomically.
  uint8_t owner = 0;
  union {
    int64_t integer;
    double fpoint;
    bool boolean;
    struct {
      const char* s;          ///< NUL-terminated
      const char** context;   ///< NULL-terminated array, or nullptr
    } str;
    const char* path;
    Bindings* attrs;
    struct {
      size_t size;
      Value** elems;
    } list;
    struct {
      Env* env;
      Expr* expr;
    } thunk;
    struct {
      Value* left;
      Value* right;
    } app;
    struct {
      Env* env;
      ExprLambda* fun;
    } lambda;
    const PrimOp* primOp;
    struct {
      Value* left;
      Value* right;
    } primOpApp;
  };

  Value() : integer(0) {}
  bool isThunk() const { return type <= VType::kBlackhole; }
  bool isFunction() const {
    return type == VType::kLambda || type == VType::kPrimOp || type == VType::kPrimOpApp;
  }
  void mkInt(int64_t n) { type = VType::kInt; integer = n; }
  void mkFloat(double d) { type = VType::kFloat; fpoint = d; }
  void mkBool(bool b) { type = VType::kBool; boolean = b; }
  void mkNull() { type = VType::kNull; }
  void mkString(const char* s, const char** ctx = nullptr) {
    type = VType::kString; str.s = s; str.context = ctx;
  }
  void mkPath(const char* p) { type = VType::kPath; path = p; }
  void mkAttrs(Bindings* b) { type = VType::kAttrs; attrs = b; }
  void mkList(size_t n, Value** elems) { type = VType::kList; list.size = n; list.elems = elems; }
  void mkThunk(Env* e, Expr* x) { type = VType::kThunk; thunk.env = e; thunk.expr = x; }
  void mkApp(Value* l, Value* r) { type = VType::kApp; app.left = l; app.right = r; }
  void mkLambda(Env* e, ExprLambda* f) { type = VType::kLambda; lambda.env = e; lambda.fun = f; }
  void mkPrimOp(const PrimOp* p) { type = VType::kPrimOp; primOp = p; }
  void mkPrimOpApp(Value* l, Value* r) { type = VType::kPrimOpApp; primOpApp.left = l; primOpApp.right = r; }
  std::string_view sv() const { return str.s; }
};

/// The state word of `v`: its type in the low byte, its owner in the high
/// one, loaded with acquire ordering (a final type makes the payload the
/// thread that published it wrote visible).
inline uint16_t valueState(const Value& v) {
  static_assert(offsetof(Value, type) == 0 && offsetof(Value, owner) == 1);
  return __atomic_load_n(reinterpret_cast<const uint16_t*>(&v), __ATOMIC_ACQUIRE);
}
/// Compares the state word of `v` with `expected` and, if equal, sets it
/// to `desired` (acquire-release); `expected` receives the current word.
inline bool casValueState(Value& v, uint16_t& expected, uint16_t desired) {
  return __atomic_compare_exchange_n(reinterpret_cast<uint16_t*>(&v), &expected, desired, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}
/// Publishes a state word (release): everything written to `v` before is
/// visible to a thread that loads it with valueState.
inline void publishValueState(Value& v, uint16_t state) {
  __atomic_store_n(reinterpret_cast<uint16_t*>(&v), state, __ATOMIC_RELEASE);
}
/// A state word from a type and an owner slot.
constexpr uint16_t makeValueState(VType t, uint8_t owner = 0) {
  return static_cast<uint16_t>(static_cast<uint8_t>(t) | (uint16_t{owner} << 8));
}

/// One attribute: name, where it was defined, value.
struct Attr {
  Symbol name;
  PosIdx pos = kNoPos;
  Value* value = nullptr;
};

/// Iterates a set's visible attributes in symbol order. For a layered set
/// it merges the set's own attributes with its base's, an own attribute
/// hiding the base's of the same name; for a flat set it walks the array.
class AttrIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = Attr;
  using difference_type = std::ptrdiff_t;
  using pointer = const Attr*;
  using reference = const Attr&;

  /// The end iterator.
  AttrIterator() = default;
  /// The first attribute of the merge of [o, oe) over [b, be).
  AttrIterator(const Attr* o, const Attr* oe, const Attr* b, const Attr* be)
      : o_(o), oe_(oe), b_(b), be_(be) {
    pick();
  }
  const Attr& operator*() const { return *cur_; }
  const Attr* operator->() const { return cur_; }
  AttrIterator& operator++() {
    if (fromOwn_) ++o_; else ++b_;
    pick();
    return *this;
  }
  bool operator==(const AttrIterator& x) const { return cur_ == x.cur_; }

 private:
  void pick() {
    fromOwn_ = o_ != oe_;
    if (fromOwn_) {
      if (b_ == be_ || o_->name < b_->name) {
        cur_ = o_;
        return;
      }
      if (o_->name == b_->name) {  // hidden by the own attribute
        ++b_;
        cur_ = o_;
        return;
      }
      fromOwn_ = false;
    }
    cur_ = b_ != be_ ? b_ : nullptr;
  }
  const Attr *o_ = nullptr, *oe_ = nullptr, *b_ = nullptr, *be_ = nullptr, *cur_ = nullptr;
  bool fromOwn_ = false;
};

/// An attribute set: attributes sorted by symbol id for binary search,
/// allocated with room for `capacity` own attributes (flexible array).
/// A layered set (`base` set; made by `//` when the right side is small
/// next to the left, docs/evaluator.md "Layered sets") holds only the
/// attributes that replace or join those of `base`, which is always flat:
/// lookups see the own attributes first, iteration merges both in symbol
/// order, and `size` counts the visible attributes. Sets are immutable once
/// made, so threads may share them without locks.
struct Bindings {
  uint32_t size = 0;      ///< visible attributes (own ones for a flat set)
  uint32_t capacity = 0;  ///< room for own attributes; a layered set's own count
  const Bindings* base = nullptr;  ///< the set under this one's own attributes, or nullptr
  Attr own[0];            ///< own attributes, sorted by name

  /// The number of own attributes (all of a flat set's).
  uint32_t ownSize() const { return base ? capacity : size; }
  Attr* ownBegin() { return own; }
  Attr* ownEnd() { return own + ownSize(); }
  const Attr* ownBegin() const { return own; }
  const Attr* ownEnd() const { return own + ownSize(); }
  /// Visible attributes in symbol order (see AttrIterator).
  AttrIterator begin() const {
    return base ? AttrIterator(own, own + capacity, base->own, base->own + base->size)
                : AttrIterator(own, own + size, nullptr, nullptr);
  }
  AttrIterator end() const { return AttrIterator(); }
  /// Appends to a flat set without sorting; call sort() afterwards.
  void push(Symbol name, Value* v, PosIdx pos = kNoPos) {
    own[size++] = Attr{name, pos, v};
  }
  /// Sorts a flat set's attributes by name.
  void sort() {
    std::sort(ownBegin(), ownEnd(), [](const Attr& a, const Attr& b) { return a.name < b.name; });
  }
  /// The own attribute named `name`, or nullptr.
  const Attr* findOwn(Symbol name) const {
    const Attr* e = ownEnd();
    const Attr* a =
        std::lower_bound(own, e, name, [](const Attr& x, Symbol n) { return x.name < n; });
    return a != e && a->name == name ? a : nullptr;
  }
  /// The visible attribute named `name`, or nullptr.
  const Attr* find(Symbol name) const {
    const Attr* a = findOwn(name);
    return a || !base ? a : base->findOwn(name);
  }
  Value* get(Symbol name) const {
    const Attr* a = find(name);
    return a ? a->value : nullptr;
  }
};

/// Runtime environment: a frame of variable slots resolved at parse time.
struct Env {
  Env* up = nullptr;
  uint32_t size = 0;
  uint16_t prevWith = 0;  ///< levels up to the enclosing `with` env
  uint8_t type = 0;       ///< kPlain, kHasWithExpr or kHasWithAttrs
  Value* values[0];
  static constexpr uint8_t kPlain = 0, kHasWithExpr = 1, kHasWithAttrs = 2;
};

/// Signature of a builtin: `args` holds exactly `arity` (unforced) values.
using PrimOpFn = void (*)(EvalState& state, PosIdx pos, Value** args, Value& v);

/// A builtin function.
struct PrimOp {
  const char* name;  ///< as shown in errors ("map", "__sub")
  uint32_t arity;
  PrimOpFn fn;
};

/// Nix-level type names, as builtins.typeOf shows them.
const char* typeOfName(const Value& v);
/// "an integer", "a set", ... as Nix's error messages show them.
const char* showType(const Value& v);

}  // namespace kiln::eval
