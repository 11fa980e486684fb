#pragma once
/// The evaluator's runtime values: a compact tagged union (24 bytes) whose
/// payloads (strings, attribute sets, lists, environments) live in the
/// EvalState's arena.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <new>
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
  /// (valueState/casValueState) that threads read and claim atomically;
  /// its top bit is kWaitedFlag.
  uint8_t owner = 0;
  /// A string's length (set by mkString; in what would be padding), or
  /// kLongString for one of 4 GiB or more, measured again when needed.
  uint32_t strLen = 0;
  static constexpr uint32_t kLongString = UINT32_MAX;
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
  void mkString(const char* s, const char** ctx = nullptr) { mkString(s, std::strlen(s), ctx); }
  /// A string of `n` bytes (s[n] is its NUL): no strlen.
  void mkString(const char* s, size_t n, const char** ctx) {
    type = VType::kString; str.s = s; str.context = ctx;
    strLen = n < kLongString ? static_cast<uint32_t>(n) : kLongString;
  }
  void mkPath(const char* p) { type = VType::kPath; path = p; }
  void mkAttrs(Bindings* b) { type = VType::kAttrs; attrs = b; }
  void mkList(size_t n, Value** elems) { type = VType::kList; list.size = n; list.elems = elems; }
  void mkThunk(Env* e, Expr* x) { type = VType::kThunk; thunk.env = e; thunk.expr = x; }
  void mkApp(Value* l, Value* r) { type = VType::kApp; app.left = l; app.right = r; }
  void mkLambda(Env* e, ExprLambda* f) { type = VType::kLambda; lambda.env = e; lambda.fun = f; }
  void mkPrimOp(const PrimOp* p) { type = VType::kPrimOp; primOp = p; }
  void mkPrimOpApp(Value* l, Value* r) { type = VType::kPrimOpApp; primOpApp.left = l; primOpApp.right = r; }
  /// A string's text, without strlen (but for kLongString).
  std::string_view sv() const {
    return strLen != kLongString ? std::string_view(str.s, strLen) : std::string_view(str.s);
  }
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
/// Publishes a state word and returns the one it replaced (an exchange,
/// acquire-release): everything written to `v` before is visible to a
/// thread that loads it with valueState, and a waiter's kWaitedFlag set
/// before it is in the word returned.
inline uint16_t publishValueState(Value& v, uint16_t state) {
  return __atomic_exchange_n(reinterpret_cast<uint16_t*>(&v), state, __ATOMIC_ACQ_REL);
}
/// In a blackhole's state word, the owner byte's top bit: set by a thread
/// that waits for it (ThreadSlots::waitFor), so that its publisher wakes
/// the waiters only when there are any.
constexpr uint16_t kWaitedFlag = 0x8000;
/// A state word from a type and an owner slot.
constexpr uint16_t makeValueState(VType t, uint8_t owner = 0) {
  return static_cast<uint16_t>(static_cast<uint8_t>(t) | (uint16_t{owner} << 8));
}
/// The owner slot of a state word (without kWaitedFlag).
constexpr uint8_t valueStateOwner(uint16_t state) {
  return static_cast<uint8_t>((state & ~kWaitedFlag) >> 8);
}

/// One attribute: name, where it was defined, value.
struct Attr {
  Symbol name;
  PosIdx pos = kNoPos;
  Value* value = nullptr;
};

struct Bindings;

/// Iterates a set's visible attributes in symbol order. For a layered set
/// it merges the own attributes of every layer, an upper layer's attribute
/// hiding the lower ones' of the same name; for a flat set it walks the
/// array.
class AttrIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = Attr;
  using difference_type = std::ptrdiff_t;
  using pointer = const Attr*;
  using reference = const Attr&;
  /// The most layers a set has (Bindings::kMaxLayers + its flat bottom).
  static constexpr int kMaxRuns = 4;

  /// The end iterator.
  AttrIterator() = default;
  /// The first visible attribute of `b`.
  explicit AttrIterator(const Bindings& b);
  const Attr& operator*() const { return *cur_; }
  const Attr* operator->() const { return cur_; }
  AttrIterator& operator++() {
    ++runs_[from_].p;
    pick();
    return *this;
  }
  bool operator==(const AttrIterator& x) const { return cur_ == x.cur_; }

 private:
  void pick() {
    if (n_ == 1) {  // a flat set
      cur_ = runs_[0].p != runs_[0].e ? runs_[0].p : nullptr;
      return;
    }
    int best = -1;  // the smallest name, the uppermost layer's on a tie
    for (int i = 0; i < n_; ++i)
      if (runs_[i].p != runs_[i].e && (best < 0 || runs_[i].p->name < runs_[best].p->name)) best = i;
    if (best < 0) {
      cur_ = nullptr;
      return;
    }
    for (int i = best + 1; i < n_; ++i)  // hidden by the upper layer's
      if (runs_[i].p != runs_[i].e && runs_[i].p->name == runs_[best].p->name) ++runs_[i].p;
    from_ = static_cast<uint8_t>(best);
    cur_ = runs_[best].p;
  }
  struct Run {
    const Attr* p;
    const Attr* e;
  };
  Run runs_[kMaxRuns];  ///< own attributes of each layer, uppermost first
  uint8_t n_ = 0, from_ = 0;
  const Attr* cur_ = nullptr;
};

/// An attribute set: attributes sorted by symbol id for binary search,
/// allocated with room for `capacity` own attributes (flexible array).
/// A layered set (`base` set; made by `//` when the right side is small
/// next to the left, docs/evaluator.md "Layered sets") holds only the
/// attributes that replace or join those of `base`, itself flat or layered
/// (at most kMaxLayers layers over a flat set): lookups see the upper
/// layers first, iteration merges the layers in symbol order, and `size`
/// counts the visible attributes. Sets are immutable once made, so threads
/// share them without locks.
/// The header is 8 bytes, so that a flat set of n attributes is 8 + 16n
/// bytes: with the byte the collector adds to each object, a 16-byte
/// header took a granule more for every set. A layered set keeps its base
/// in the 8 bytes after its own attributes (allocBindings(n, true) makes
/// room for it).
struct alignas(8) Bindings {
  /// The most layers over a flat set (lookups cost O(layers · log n)).
  static constexpr int kMaxLayers = AttrIterator::kMaxRuns - 1;
  uint32_t size = 0;  ///< visible attributes (own ones for a flat set)

 private:
  static constexpr uint32_t kLayered = 1u << 31;
  uint32_t capacity_ = 0;  // bit 31: layered

 public:
  Attr own[0];  ///< own attributes, sorted by name (after the 8-byte header)

  /// Room for own attributes; a layered set's own count.
  uint32_t capacity() const { return capacity_ & ~kLayered; }
  /// Sets the capacity, keeping whether the set is layered.
  void setCapacity(uint32_t n) { capacity_ = (capacity_ & kLayered) | n; }
  /// Whether the set was allocated as a layer (with room for a base).
  bool layered() const { return capacity_ & kLayered; }
  /// Marks a new set as a layer, before its attributes are added.
  void setLayered() { capacity_ |= kLayered; }
  /// The set under this one's own attributes, or nullptr.
  const Bindings* base() const {
    return layered() ? *reinterpret_cast<const Bindings* const*>(own + capacity()) : nullptr;
  }
  /// Sets a layered set's base, once its own attributes are final.
  void setBase(const Bindings* b) { *reinterpret_cast<const Bindings**>(own + capacity()) = b; }

  /// The number of own attributes (all of a flat set's).
  uint32_t ownSize() const { return layered() ? capacity() : size; }
  Attr* ownBegin() { return own; }
  Attr* ownEnd() { return own + ownSize(); }
  const Attr* ownBegin() const { return own; }
  const Attr* ownEnd() const { return own + ownSize(); }
  /// Layers over the flat set at the bottom (0 for a flat set).
  int layers() const {
    int n = 0;
    for (const Bindings* b = base(); b; b = b->base()) ++n;
    return n;
  }
  /// Visible attributes in symbol order (see AttrIterator).
  AttrIterator begin() const { return AttrIterator(*this); }
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
    const Bindings* b = this;
    const Attr* a;
    while (!(a = b->findOwn(name)) && (b = b->base())) {
    }
    return a;
  }
  Value* get(Symbol name) const {
    const Attr* a = find(name);
    return a ? a->value : nullptr;
  }
};

inline AttrIterator::AttrIterator(const Bindings& b) {
  for (const Bindings* l = &b; l; l = l->base()) runs_[n_++] = Run{l->ownBegin(), l->ownEnd()};
  pick();
}

/// Runtime environment: a frame of variable slots resolved at parse time.
/// Only the code that made it knows its size (the AST node: a lambda's
/// arguments, a let's bindings), so it keeps none: a plain lambda's
/// environment is 16 bytes (7.4 million of them at gen-pkgset 50,000).
/// A `with` environment has one value, the set's thunk, and its WithInfo
/// in the slot after it (withInfo).
struct Env {
  Env* up = nullptr;
  Value* values[0];
};

/// What a `with` environment knows besides its set: where the enclosing
/// `with` is and whether the set was forced.
struct WithInfo {
  uint16_t prevWith = 0;  ///< levels up to the enclosing `with` env (0: none)
  uint8_t type = 0;       ///< kHasWithExpr or kHasWithAttrs
  static constexpr uint8_t kHasWithExpr = 1, kHasWithAttrs = 2;
};
static_assert(sizeof(WithInfo) <= sizeof(Value*));

/// The WithInfo of `e`, a `with` environment (made with two slots).
inline WithInfo& withInfo(Env& e) {
  return *std::launder(reinterpret_cast<WithInfo*>(reinterpret_cast<char*>(e.values) + sizeof(Value*)));
}

/// Signature of a builtin: `args` holds exactly `arity` (unforced) values.
using PrimOpFn = void (*)(EvalState& state, PosIdx pos, Value** args, Value& v);

/// A builtin function.
struct PrimOp {
  const char* name;  ///< as shown in errors ("map", "__sub")
  uint32_t arity;
  PrimOpFn fn;
  /// Bit i set: argument i is a list the builtin forces before it returns,
  /// so a constant list literal there is passed as its shared value, not
  /// a thunk of it (ExprCall::eval; BuiltinTable::addPrimOp sets these).
  uint32_t forcedLists;
};

/// Nix-level type names, as builtins.typeOf shows them.
const char* typeOfName(const Value& v);
/// "an integer", "a set", ... as Nix's error messages show them.
const char* showType(const Value& v);

}  // namespace kiln::eval
