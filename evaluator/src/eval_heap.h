#pragma once
// EvalState's heap: the collectable memory of values, environments,
// attribute sets, lists, strings and context arrays made while evaluating
// (Boehm GC), with each evaluating thread's own allocation lists.
// Evaluator-internal: EvalState::heap() (docs/evaluator.md, "Garbage
// collection"; docs/architecture.md, "The evaluator's parts").

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string_view>

#include "kiln/evaluator/arena.h"
#include "kiln/evaluator/eval_state.h"
#include "kiln/evaluator/eval_stats.h"
#include "kiln/evaluator/value.h"

namespace kiln::eval {

/// Allocation for one EvalState. What is made before startCollecting (the
/// builtins, the base environment) lives in the state's arenas, as long as
/// the state; afterwards values, environments, sets and lists are
/// collectable (alive while something the collector scans points to them:
/// a stack, the arena, a collectable object, the state), and strings and
/// context arrays are collectable atomic objects. The strings a context
/// array lists (store paths) and the literal strings of the AST live in
/// the arena.
class EvalHeap {
 public:
  /// Allocates from `arena` (unscanned) and `permanent` (scanned) until
  /// startCollecting; `sharedMutex` guards `permanent` while threaded.
  EvalHeap(Arena& arena, Arena& permanent, std::mutex& sharedMutex);
  ~EvalHeap();
  EvalHeap(const EvalHeap&) = delete;
  EvalHeap& operator=(const EvalHeap&) = delete;

  /// From now on, memory is collectable (unless KILN_NO_GC is set).
  void startCollecting();
  /// Threaded evaluation: each thread allocates from its own lists.
  void beginThreads();
  /// Back to one thread: the threads' lists are dropped.
  void endThreads();

  Value* allocValue() {
    SlotBlocks& b = blocks_[kValueStream];
    if (__builtin_expect(b.next != b.end, 1)) {
      Value* v = new (b.next) Value();
      b.next += sizeof(Value);
      return v;
    }
    return allocValueSlow();
  }
  /// A value in a collectable object of its own, for one that soon dies
  /// while values made next to it live on (a fold's accumulator between
  /// steps): allocValue's blocks hold three, and a live neighbour keeps a
  /// dead value's block, and all the value points to, reachable.
  Value* allocLoneValue() {
    return new (allocMemory(sizeof(Value), alignof(Value))) Value();
  }
  /// A value that lives as long as the state (for caches held in memory
  /// the collector does not scan).
  Value* allocPermanentValue() { return permanent_.make<Value>(); }
  /// The string value of symbol `name`'s text (no context): one per symbol,
  /// made on first use in the permanent arena and shared by every list
  /// attrNames makes and every name mapAttrs passes (a final value is
  /// never changed). Thread-safe. Symbols past the cache get a fresh
  /// collectable value.
  Value* nameValue(Symbol name, const SymbolTable& symbols);
  /// A flat set of `capacity` attributes that lives as long as the state
  /// (a cache held in memory the collector does not scan: its attributes'
  /// values must live as long, as static ones do).
  Bindings* allocPermanentBindings(uint32_t capacity);
  /// An environment of `size` variables (inline, as allocValue: one per
  /// function call). `lone`: in a collectable object of its own even with
  /// one variable (those are packed seven to a block), for one that soon
  /// dies while environments made next to it live on.
  Env& allocEnv(uint32_t size, bool lone = false) {
    const size_t bytes = sizeof(Env) + sizeof(Value*) * size;
    if (counts_) countAlloc(counts_->envsBySize, size, counts_->envs, counts_->envBytes, bytes);
    // An environment of one variable (a plain lambda's: most of them) takes
    // 16 bytes in a block of seven (alone, a 32-byte granule).
    static_assert(sizeof(Env) + sizeof(Value*) == kEnvSlot && alignof(Env) <= alignof(Value));
    static_assert(kEnvSlot * kEnvsPerBlock < 128);  // one 128-byte object with the collector's byte
    Env* e = new (size == 1 && collect_ && !lone
                      ? allocEnvSlot()
                      : allocMemory(bytes, alignof(Env))) Env();
    return *e;
  }
  /// A set with room for `capacity` own attributes; `layered`: also for
  /// a base (Bindings::setBase). Throws EvalError past 2^31 attributes.
  Bindings* allocBindings(uint32_t capacity, bool layered = false);
  /// Lowers the capacity of `b`, the last thing allocated, to its size,
  /// giving the rest back to the arena (a set made at an upper bound; a
  /// collectable set keeps its tail until it is collected).
  void trimBindings(Bindings* b);
  Value** allocList(size_t n);
  /// A list of `n` fresh values (zeroed) in one object: the array, then
  /// the values it points to. For elements a builtin makes (map's
  /// applications): they die with the list, where in value blocks a dead
  /// list's forced elements stayed live beside values made next to them.
  Value** allocListOfValues(size_t n);
  /// Room for a string of `len` bytes and its NUL (written by the caller):
  /// collectable once collecting (an atomic object, alive while a value, a
  /// scanned object or a stack points into it), else in the arena. Anything
  /// that keeps a view of such a string where the collector does not look
  /// must copy it (or keep the value reachable).
  char* allocString(size_t len) {
    // Strings hold no pointers, so they are atomic objects: the collector
    // neither clears nor scans them. libgc's per-thread lists serve small
    // ones; larger ones take its lock, behind the gate when threaded. The NUL
    // goes in the byte the collector adds to every object (so that a pointer
    // just past what was asked for still points into it): a pointer just past
    // a string's characters points at its NUL, inside the object. With a byte
    // of its own, one string in 16 took a 16-byte granule more.
    if (!collect_) return static_cast<char*>(arena_.allocate(len + 1, 1));
    const size_t ask = len + (interiorPointers_ ? 0 : 1);
    if (counts_) countAlloc(nullptr, 0, counts_->strings, counts_->stringBytes, len + 1);
    return static_cast<char*>(allocAtomic(ask ? ask : 1));
  }
  /// A collectable NUL-terminated copy of `s` (allocString).
  const char* copyString(std::string_view s) {
    char* p = allocString(s.size());
    std::memcpy(p, s.data(), s.size());
    p[s.size()] = 0;
    return p;
  }
  /// A zeroed context array of `n` entries and the terminating nullptr,
  /// collectable as allocString's strings: its entries must be strings
  /// that live as long as the state (arena copies: EvalState::addContext),
  /// which it does not keep alive.
  const char** allocContext(size_t n);
  /// Collectable allocations by kind, or nullptr when not counted
  /// (counted only with KILN_EVAL_STATS set: eval_stats.h).
  const AllocCounts* counts() const { return counts_.get(); }
  /// Adds `bytes` of parsing to the counts (when counting).
  void countParseBytes(uint64_t bytes);

 private:
  /// A stream of fixed-size slots carved from collectable blocks (one
  /// object each, from GC_malloc_many): values, and one-variable
  /// environments (16 bytes, seven to a block), which come from blocks of
  /// their own: an environment sharing a block with newer values would
  /// keep what it refers to alive through them (a `foldl'` loop's every
  /// accumulator). A block lives while any slot is reachable.
  struct SlotBlocks {
    char* next = nullptr;  // in the current block
    char* end = nullptr;
    void* freeBlocks = nullptr;  // from GC_malloc_many, linked by first word
  };
  static constexpr size_t kValueStream = 0, kEnvStream = 1, kStreams = 2;
  static constexpr size_t kSizedMax = 2048, kSizedStep = 16;
  /// One evaluating thread's allocation lists (slot 0 unused). In this
  /// object, which the collector scans (it lives in the EvalState), so a
  /// thread's current block stays alive.
  struct alignas(64) ThreadLists {  // no cache line shared by two threads' lists
    SlotBlocks blocks[kStreams];    // values, environments
    void* sized[kSizedMax / kSizedStep + 2] = {};  // allocSizedThreaded's lists, by granules
  };
  /// A zeroed slot of `slot` bytes from `s`, refilled `perBlock` at a time.
  static void* takeSlot(SlotBlocks& s, size_t slot, size_t perBlock);
  Value* allocValueSlow();
  /// The calling thread's value (threaded evaluation: eval_threads.cc).
  Value* allocValueThreaded();
  /// Threaded evaluation's collectable memory of up to kSizedMax bytes,
  /// from this thread's own lists (GC_malloc_many fills one per size in
  /// 16-byte steps, a heap block's worth at a time, behind the collector
  /// gate of gc_support.h, as every other refill of threaded evaluation).
  /// libgc keeps per-thread lists only up to 384 bytes, and refills them
  /// under its lock alone, where contending threads slept.
  void* allocSizedThreaded(size_t size);
  /// One evaluating thread's collectable memory of up to kSizedMax bytes,
  /// from sized_ (as allocSizedThreaded, without the gate's need): a list
  /// pop instead of libgc's GC_malloc path for every set, list and
  /// environment of more than one variable.
  void* allocSized(size_t size);
  /// One evaluating thread's atomic memory of up to kSizedMax bytes, from
  /// atomicSized_ (uninitialised).
  void* allocAtomicSized(size_t bytes);
  /// Empties atomicSized_ if a collection has finished marking since its
  /// lists were filled: their objects past each head are free again.
  void dropAtomicListsIfCollected();
  /// allocSized's refill of the empty `list` of `steps`-step objects.
  __attribute__((noinline)) static void* refillSized(void*& list, size_t steps);
  /// The 16-byte steps an object of `size` bytes takes, as GC_MALLOC sizes
  /// it: with room for the collector's extra byte, so a pointer just past
  /// the last byte asked for (a loop's end pointer, kept in a register)
  /// still points into the object and keeps it alive. Sizes without that
  /// byte freed objects still in use (a `//` loop crashed with two threads
  /// and frequent collections).
  size_t sizedSteps(size_t size) const {
    const size_t extra = interiorPointers_ ? 1 : 0;
    return std::max<size_t>(1, (size + extra + kSizedStep - 1) / kSizedStep);
  }
  /// A zeroed one-variable environment's memory from the env blocks
  /// (this thread's, in threaded evaluation).
  void* allocEnvSlot();
  /// Raw zeroed memory: collectable once collecting, else from the arena.
  void* allocMemory(size_t size, size_t align);
  /// Collectable memory the collector does not scan (uninitialised).
  void* allocAtomic(size_t bytes);
  /// Adds one allocation of `bytes` (`n` slots) to `count`, `total` and
  /// `bySize` (when counting).
  void countAlloc(uint64_t* bySize, uint64_t n, uint64_t& count, uint64_t& total, uint64_t bytes);

  // Values are handed out from collectable blocks of kValuesPerBlock:
  // alone, a 24-byte value takes a 32-byte granule (the collector adds a
  // byte to each object for interior pointers); three share an 80-byte
  // object. A block lives while any of its values does, and so does
  // everything its dead values point to: gen-pkgset 50,000 peaks at
  // 882 MB with blocks of two, 852 with three, 884 with four and 889 with
  // five (docs/evaluator.md). Threaded evaluation: each thread's own
  // (ThreadLists), these stay empty.
  static constexpr size_t kValuesPerBlock = 3;
  static constexpr size_t kEnvSlot = sizeof(Env) + sizeof(Value*);
  static constexpr size_t kEnvsPerBlock = 7;
  SlotBlocks blocks_[kStreams];  // first: allocValue's fast path
  /// allocSized's lists, by 16-byte steps (GC_malloc_many lists: objects
  /// linked through their first word, scanned in this object as the
  /// threads' lists are). Emptied when threads start.
  void* sized_[kSizedMax / kSizedStep + 2] = {};
  /// allocAtomicSized's lists, by 16-byte steps (GC_generic_malloc_many
  /// lists of atomic objects): dropped when a collection has started since
  /// they were filled (atomicEpoch_, dropAtomicListsIfCollected) and when
  /// threads start.
  void* atomicSized_[kSizedMax / kSizedStep + 2] = {};
  uint64_t atomicEpoch_ = 0;
  bool collect_ = false;         // startCollecting ran (and KILN_NO_GC is unset)
  bool threaded_ = false;
  bool interiorPointers_ = false;  // GC_get_all_interior_pointers(), from startCollecting
  std::unique_ptr<AllocCounts> counts_;  // KILN_EVAL_STATS only
  Arena& arena_;
  Arena& permanent_;
  std::mutex& sharedMutex_;
  // nameValue's cache: chunks of kNameChunk value pointers (calloc'd on
  // first use, read and set through atomic_ref), for symbol ids below
  // kNameChunks * kNameChunk.
  static constexpr uint32_t kNameChunkBits = 12, kNameChunk = 1u << kNameChunkBits;
  static constexpr uint32_t kNameChunks = 1024;
  std::unique_ptr<Value**[]> nameChunks_{new Value**[kNameChunks]()};
  ThreadLists threads_[EvalState::kMaxThreads + 1];
};

}  // namespace kiln::eval
