// EvalHeap: allocation of an EvalState's values, environments, sets,
// lists, strings and context arrays (threaded evaluation's own lists:
// eval_threads.cc).
#include "eval_heap.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "eval_parts.h"
#include "gc_support.h"  // first: GC_THREADS before any libgc header
#include <gc/gc_inline.h>  // GC_generic_malloc_many, GC_I_PTRFREE
#include "kiln/evaluator/eval_stats.h"

namespace kiln::eval {

EvalHeap::EvalHeap(Arena& arena, Arena& permanent, std::mutex& sharedMutex)
    : arena_(arena), permanent_(permanent), sharedMutex_(sharedMutex) {
  if (evalStatsRequested()) counts_ = std::make_unique<AllocCounts>();
}

EvalHeap::~EvalHeap() {
  for (SlotBlocks& b : blocks_) b = SlotBlocks();
  for (uint32_t c = 0; c < kNameChunks; ++c) std::free(nameChunks_[c]);
}

Value* EvalHeap::nameValue(Symbol name, const SymbolTable& symbols) {
  auto fill = [&](Value* v) {
    v->mkString(symbols.cName(name), symbols.name(name).size(), nullptr);
    return v;
  };
  const uint32_t c = name.id >> kNameChunkBits;
  // Past the cache, a collectable value each time (a permanent one per
  // call would grow without bound in a loop).
  if (c >= kNameChunks) return fill(allocValue());
  std::atomic_ref<Value**> chunkRef(nameChunks_[c]);
  Value** chunk = chunkRef.load(std::memory_order_acquire);
  if (!chunk) {
    auto* fresh = static_cast<Value**>(std::calloc(kNameChunk, sizeof(Value*)));
    if (!fresh) throw std::bad_alloc();
    if (chunkRef.compare_exchange_strong(chunk, fresh, std::memory_order_acq_rel))
      chunk = fresh;
    else
      std::free(fresh);  // another thread's chunk is in `chunk`
  }
  std::atomic_ref<Value*> slot(chunk[name.id & (kNameChunk - 1)]);
  Value* v = slot.load(std::memory_order_acquire);
  if (v) return v;
  Value* fresh = fill(allocPermanentValue());  // the arena's shared mode serves threads
  // Two threads may both make it: the loser's stays in the arena.
  return slot.compare_exchange_strong(v, fresh, std::memory_order_acq_rel) ? fresh : v;
}

void EvalHeap::startCollecting() {
  // KILN_NO_GC=1: nothing is collected (to measure what collection costs).
  collect_ = !std::getenv("KILN_NO_GC");
  if (!collect_) GC_disable();
  interiorPointers_ = GC_get_all_interior_pointers() != 0;
}

void EvalHeap::countParseBytes(uint64_t bytes) {
  if (counts_) __atomic_fetch_add(&counts_->parseArenaBytes, bytes, __ATOMIC_RELAXED);
}

void* EvalHeap::allocMemory(size_t size, size_t align) {
  if (!collect_) {
    void* p = permanent_.allocate(size, align);
    std::memset(p, 0, size);
    return p;
  }
  if (threaded_) {
    if (size <= kSizedMax) return allocSizedThreaded(size);
    void* p = withCollectorGate([&] { return GC_MALLOC(size); });  // zeroed
    if (!p) throw std::bad_alloc();
    return p;
  }
  if (size <= kSizedMax) return allocSized(size);
  void* p = GC_MALLOC(size);  // zeroed
  if (!p) throw std::bad_alloc();
  return p;
}

void* EvalHeap::allocSized(size_t size) {
  const size_t steps = sizedSteps(size);
  void*& list = sized_[steps];
  if (__builtin_expect(!list, 0)) return refillSized(list, steps);
  void* p = list;
  list = *static_cast<void**>(p);
  *static_cast<void**>(p) = nullptr;  // zeroed, as the rest of it
  return p;
}

void* EvalHeap::refillSized(void*& list, size_t steps) {
  return takeFromMany(list, manyRequestFor(steps * kSizedStep));
}

void EvalHeap::countAlloc(uint64_t* bySize, uint64_t n, uint64_t& count, uint64_t& total,
                           uint64_t bytes) {
  if (__builtin_expect(!counts_, 1)) return;
  if (bySize) __atomic_fetch_add(&bySize[AllocCounts::sizeBucket(n)], 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED);  // threads may count at once
  __atomic_fetch_add(&total, bytes, __ATOMIC_RELAXED);
}

Value* EvalHeap::allocValueSlow() {
  if (threaded_) return allocValueThreaded();
  if (!collect_) return permanent_.make<Value>();
  if (counts_)  // the fast path found the block empty: a new one is taken
    countAlloc(nullptr, 0, counts_->valueBlocks, counts_->valueBytes,
               sizeof(Value) * kValuesPerBlock);
  static_assert(sizeof(Value) * kValuesPerBlock % 16 != 0);  // the collector's byte fits
  return new (takeSlot(blocks_[kValueStream], sizeof(Value), kValuesPerBlock)) Value();
}

void* EvalHeap::allocEnvSlot() {
  return takeSlot(
      threaded_ ? threads_[ThreadSlots::current()].blocks[kEnvStream] : blocks_[kEnvStream],
      kEnvSlot, kEnvsPerBlock);
}

void* EvalHeap::takeSlot(SlotBlocks& s, size_t slot, size_t perBlock) {
  if (s.next == s.end) {
    s.next = static_cast<char*>(takeFromMany(s.freeBlocks, slot * perBlock));
    s.end = s.next + slot * perBlock;
  }
  void* p = s.next;
  s.next += slot;
  return p;
}

// A set's bytes: the header, `n` attributes, and a layer's base pointer.
static size_t bindingsBytes(uint32_t n, bool layered) {
  static_assert(sizeof(Bindings) == 8 && alignof(Bindings) == alignof(Attr));
  return sizeof(Bindings) + sizeof(Attr) * n + (layered ? sizeof(Bindings*) : 0);
}

Bindings* EvalHeap::allocBindings(uint32_t capacity, bool layered) {
  if (capacity >= (1u << 31)) throw EvalError("attribute set too large");
  const size_t bytes = bindingsBytes(capacity, layered);
  if (counts_)
    countAlloc(counts_->bindingsBySize, capacity, counts_->bindings, counts_->bindingsBytes, bytes);
  Bindings* b = new (allocMemory(bytes, alignof(Bindings))) Bindings();
  b->setCapacity(capacity);
  if (layered) b->setLayered();
  return b;
}

Bindings* EvalHeap::allocPermanentBindings(uint32_t capacity) {
  Bindings* b = new (permanent_.allocate(bindingsBytes(capacity, false), alignof(Bindings)))
      Bindings();
  b->setCapacity(capacity);
  return b;
}

void EvalHeap::trimBindings(Bindings* b) {
  if (!collect_)
    permanent_.shrinkLast(b, bindingsBytes(b->capacity(), b->layered()),
                         bindingsBytes(b->size, b->layered()));
  b->setCapacity(b->size);
}

Value** EvalHeap::allocListOfValues(size_t n) {
  if (n == 0) return allocList(0);
  if (n > (SIZE_MAX / 2) / (sizeof(Value*) + sizeof(Value)))
    throw std::bad_alloc();
  if (counts_)  // all of it as a list's: value blocks are counted by block
    countAlloc(counts_->listsBySize, n, counts_->lists, counts_->listBytes,
               (sizeof(Value*) + sizeof(Value)) * n);
  auto** elems = static_cast<Value**>(
      allocMemory((sizeof(Value*) + sizeof(Value)) * n, alignof(Value)));
  auto* values = reinterpret_cast<Value*>(elems + n);
  for (size_t i = 0; i < n; ++i) elems[i] = new (values + i) Value();
  return elems;
}

Value** EvalHeap::allocList(size_t n) {
  if (counts_)
    countAlloc(counts_->listsBySize, n, counts_->lists, counts_->listBytes, sizeof(Value*) * n);
  // Empty lists (a third of a package set's lists) share one array: nothing is ever stored in it.
  static Value* noElems[1] = {nullptr};
  if (n == 0) return noElems;
  return static_cast<Value**>(allocMemory(sizeof(Value*) * n, alignof(Value*)));
}

const char** EvalHeap::allocContext(size_t n) {
  const size_t bytes = sizeof(const char*) * (n + 1);
  if (!collect_) return arena_.makeArray<const char*>(n + 1);
  if (counts_) countAlloc(nullptr, 0, counts_->contexts, counts_->contextBytes, bytes);
  // As a string's NUL: the terminating nullptr's last byte takes the byte
  // the collector adds, so a one-entry array is one 16-byte granule.
  void* p = allocAtomic(bytes - (interiorPointers_ ? 1 : 0));
  std::memset(p, 0, bytes);
  return static_cast<const char**>(p);
}

void* EvalHeap::allocAtomic(size_t bytes) {
  // libgc's per-thread lists hold objects of up to 25 granules (with its
  // extra byte); larger requests take its global lock.
  constexpr size_t kThreadLocalMax = 25 * 16 - 1;
  if (!threaded_ && bytes <= kSizedMax) return allocAtomicSized(bytes);
  void* p = threaded_ && bytes > kThreadLocalMax
                ? withCollectorGate([&] { return GC_MALLOC_ATOMIC(bytes); })
                : GC_MALLOC_ATOMIC(bytes);
  if (!p) throw std::bad_alloc();
  return p;
}

void EvalHeap::dropAtomicListsIfCollected() {
  // GC_gc_no counts the collections that finished marking; this thread is
  // the only one allocating, and a collection runs inside its allocations.
  const uint64_t collections = GC_get_gc_no();
  if (__builtin_expect(atomicEpoch_ == collections, 1)) return;
  std::fill(std::begin(atomicSized_), std::end(atomicSized_), nullptr);
  atomicEpoch_ = collections;
}

void* EvalHeap::allocAtomicSized(size_t bytes) {
  // Objects past a list's head are unreachable to the collector (their
  // links are in atomic objects): after a collection they are free.
  dropAtomicListsIfCollected();
  const size_t steps = sizedSteps(bytes);
  void*& list = atomicSized_[steps];
  if (__builtin_expect(!list, 0)) {
    void* fresh = nullptr;
    // Unlike GC_malloc_many, it takes the object's whole size (granules,
    // the collector's extra byte included).
    GC_generic_malloc_many(steps * kSizedStep, GC_I_PTRFREE, &fresh);
    if (!fresh) throw std::bad_alloc();
    // A collection in the refill freed the other lists' objects.
    dropAtomicListsIfCollected();
    list = fresh;
  }
  void* p = list;
  list = *static_cast<void**>(p);
  return p;
}

}  // namespace kiln::eval
