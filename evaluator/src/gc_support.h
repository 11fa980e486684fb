#pragma once
// The Boehm collector as the evaluator uses it (docs/evaluator.md,
// "Memory"). Included only by the evaluator's own sources: with GC_THREADS,
// pthread_create in them registers the new thread with the collector.
#define GC_THREADS
#include <gc/gc.h>
#include <gc/gc_allocator.h>

#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <deque>
#include <new>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::eval {

/// An address range [lo, hi).
struct AddressRange {
  uintptr_t lo, hi;
};

/// The collector's heap-resize callback, whenever its heap grows
/// (huge_pages.cc): hands new heap sections to the heap warmer, and with
/// KILN_HUGE_PAGES=1 asks the kernel for transparent huge pages on every
/// anonymous private read-write mapping of at least 2 MiB. Allocates
/// nothing; errors are ignored (both are hints).
void onHeapGrowth();
/// With KILN_HUGE_PAGES=1, huge pages for [p, p + n) (an arena chunk).
void adviseHugePages(void* p, size_t n);

/// Starts the heap warmer (heap_warmer.cc): a helper thread that populates
/// new heap sections, so that the collector does not clear their pages
/// under its lock while other evaluating threads wait. For threaded
/// evaluation with two or more threads; a no-op with KILN_NO_HEAP_WARMER
/// set, when running, or when no thread can be started.
void startHeapWarmer();
/// Stops and joins the warmer (a no-op when it does not run).
void stopHeapWarmer();
/// Whether the warmer runs (and the kernel can populate memory for it).
bool heapWarmerRunning();
/// Whether the warmer is growing the heap now and new memory of `bytes`
/// can hold the section it adds (for the heap-resize callback, which that
/// growth calls).
bool heapWarmerGrowsBy(size_t bytes);
/// Hands [lo, hi), a new section of the collector's heap, to the warmer in
/// place of any section it was given before (from the heap-resize
/// callback: allocates nothing). Ignored when it does not run.
void warmHeapSection(uintptr_t lo, uintptr_t hi);

/// Grows the collector's mark stack to at least `entries` (rounded up to
/// its initial 1,048,576 times a power of two) with a few small collections
/// when that is more than it has (none otherwise), and from then on gives
/// its pages back after each collection's marking (mark_stack.cc). Call
/// once, right after GC_INIT, before other threads allocate.
void growMarkStack(size_t entries);

/// Runs `fn` (a call into the collector's allocator) while no other
/// evaluating thread of this process is in one: see gc_gate.cc. The
/// collector's own lock is a plain mutex that puts a contending thread to
/// sleep; this gate spins a few microseconds first, which is how long the
/// collector holds its lock for a refill.
void lockCollectorGate();
/// Ends lockCollectorGate's hold.
void unlockCollectorGate();
template <class F>
auto withCollectorGate(F&& fn) {
  struct Hold {
    Hold() { lockCollectorGate(); }
    ~Hold() { unlockCollectorGate(); }
  } hold;
  return fn();
}

/// The size to ask GC_malloc_many for so that its objects take exactly
/// `bytes` (a multiple of the 16-byte granule): the collector adds one byte
/// to every request when it recognises interior pointers. The caller
/// leaves that byte free itself (allocSizedThreaded).
inline size_t manyRequestFor(size_t bytes) {
  return bytes - (GC_get_all_interior_pointers() ? 1 : 0);
}

/// The next object from `list`, a GC_malloc_many list of `bytes`-sized
/// objects linked through their first word (refilled, a heap block's worth
/// under the collector's lock and the gate, when empty). The object comes
/// zeroed: its link is cleared so the scanner sees no stale pointer. Throws
/// std::bad_alloc.
inline void* takeFromMany(void*& list, size_t bytes) {
  if (!list) {
    list = withCollectorGate([&] { return GC_malloc_many(bytes); });
    if (!list) throw std::bad_alloc();
  }
  void* p = list;
  list = *static_cast<void**>(p);
  *static_cast<void**>(p) = nullptr;
  return p;
}

/// Containers whose storage the collector scans: for values that may be
/// referred to from nowhere else while a builtin works (heap memory from
/// std::allocator is invisible to the collector). A TracedVector keeps its
/// first N elements inside itself, so as a local variable (on a thread's
/// stack, which the collector scans) it allocates nothing until it grows
/// past N: the collector's uncollectable allocations and frees take its
/// global lock, which threaded evaluation's threads contended for (the
/// derivation builtin made a dozen per derivation). Only for locals and
/// for elements of other traced containers.
template <class T>
struct TracedAllocator {  // traceable_allocator's, minimal (Boost rebinds it to void)
  using value_type = T;
  TracedAllocator() = default;
  template <class U>
  TracedAllocator(const TracedAllocator<U>&) {}
  T* allocate(size_t n) {
    void* p = withCollectorGate([&] { return GC_MALLOC_UNCOLLECTABLE(n * sizeof(T)); });
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) {
    withCollectorGate([&] {
      GC_FREE(p);
      return 0;
    });
  }
  template <class U>
  bool operator==(const TracedAllocator<U>&) const { return true; }
};
template <class T, size_t N = 8>
using TracedVector = boost::container::small_vector<T, N, TracedAllocator<T>>;
/// A traced vector always on the collector's heap: for groups of groups
/// (nested small vectors copy badly and trip GCC's -Wstringop-overread).
template <class T>
using TracedHeapVector = std::vector<T, traceable_allocator<T>>;
template <class T>
using TracedDeque = std::deque<T, traceable_allocator<T>>;
template <class K, class V>
using TracedMap =
    std::unordered_map<K, V, std::hash<K>, std::equal_to<K>,
                       traceable_allocator<std::pair<const K, V>>>;
template <class K>
using TracedSet = std::unordered_set<K, std::hash<K>, std::equal_to<K>,
                                     traceable_allocator<K>>;

}  // namespace kiln::eval
