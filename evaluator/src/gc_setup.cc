// The garbage collector's process-wide set-up (docs/evaluator.md,
// "Garbage collection"): when it collects, and its mark stack.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "gc_support.h"
#include "kiln/evaluator/eval_state.h"
#include "kiln/evaluator/eval_stats.h"

// tcmalloc's settings, when the executable links it (cli/CMakeLists.txt):
// weak, so that programs on glibc's malloc (the tests) link without it.
extern "C" int MallocExtension_SetNumericProperty(const char* property, size_t value)
    __attribute__((weak));

namespace kiln::eval {

namespace {
std::atomic<unsigned> evalThreads{1};  // setCollectorForThreads
constexpr size_t kInitialHeap = size_t{64} << 20;
// One thread: the first collection at 80 MiB (issue 36, fifth pass; 128
// MiB before, 256 MiB until the strings became collectable). Where the last
// collection falls decides the peak; with the large-heap divisor below,
// 80 MiB gave smaller peaks on 8 of the 10 benchmark cells (gen-strings
// 10,000 193 -> 161 MB, gen-scopes 50,000 301 -> 285 MB) and larger on
// two (gen-overrides 50,000 860 -> 876 MB, gen-files 50,000 320 -> 324
// MB): docs/evaluator.md, "Garbage collection".
constexpr size_t kGcEvery = size_t{80} << 20;
// Once the heap passes kLargeHeap, the free-space divisor goes from 1 to 2:
// a collection then waits for half as much allocation as survived, so the
// heap grows by less past each (gen-strings 50,000 604 -> 582 MB for
// ~0.12 s more collection). Small heaps keep divisor 1: there a collection
// frees little and each costs as much.
constexpr size_t kLargeHeap = size_t{256} << 20;
constexpr unsigned long kLargeHeapDivisor = 2;
size_t largeHeap = 0;  // kLargeHeap, or KILN_GC_LARGE_HEAP; 0: no change
// Two or more evaluating threads (`kiln eval --workers N`): a collection
// stops every thread, so it is serial time for the run, and it marks on two.
// The first waits for 256 MiB, and no large-heap divisor (issue 36,
// sixteenth pass): 512 MiB made gen-overrides 50,000 mark ~460 MB of live
// heap once (0.34 s CPU) where 256 MiB marks ~220 MB (0.18 s), gen-byname
// 0.31 -> 0.16 s, gen-strings' peak 680 -> 579 MB; gen-pkgset pays a
// second collection (0.23 -> 0.31 s). One evaluating thread, threaded or
// not, collects as one process does (kGcEvery, kLargeHeap): with 512 MiB,
// `--workers 1` marked gen-overrides' live heap once at ~530 MB (0.6 s)
// where one process marked it at 90 and 245 MB (0.35 s).
constexpr size_t kGcEveryThreaded = size_t{256} << 20;
// The size classes shapeSizeClasses makes: for 9, 8, 6, 5, 4, 3 and 2
// objects to a 4 KiB block (libgc's HBLKSIZE), the largest size of an even
// number of 16-byte granules (libgc's rule for classes past 24 granules).
constexpr size_t kMidSizeClasses[] = {448, 512, 672, 800, 1024, 1344, 2048};
}  // namespace

std::vector<size_t> shapeSizeClasses() {
  // libgc makes a size class on the first request of a size past its
  // initial map (383 bytes), stretched by an eighth over the smallest size
  // not yet mapped and then to the largest size with as many objects to a
  // 4 KiB block: a first 920-byte string made a class of 1,344 bytes (3 a
  // block), and every string of 920-1,343 bytes then took 1,344 where 4 of
  // up to 1,024 fit. Asked first, in ascending order, for the largest size
  // of each count of objects a block holds, libgc makes exactly those
  // classes and maps every size up to 2,047 bytes to the smallest class
  // that holds it. (7 a block, 576 bytes, cannot be had after 512: the
  // eighth makes it 672.)
  std::vector<size_t> classes;
  for (size_t bytes : kMidSizeClasses) {
    // The collector adds a byte to each object (interior pointers).
    void* p = GC_malloc_atomic(bytes - 1);
    if (p) classes.push_back(GC_size(p));
    GC_free(p);
  }
  return classes;
}

CollectorPolicy collectorPolicyFor(unsigned threads) {
  if (threads > 1) return {kGcEveryThreaded, 0};
  return {kGcEvery, kLargeHeap};
}

unsigned long freeSpaceDivisorFor(size_t heapBytes, size_t largeHeapBytes) {
  return largeHeapBytes && heapBytes >= largeHeapBytes ? kLargeHeapDivisor : 1;
}

void setCollectorForThreads(unsigned threads) {
  // Two markers with two threads or more. Parallel marking used to be slower
  // here (gen-pkgset 50,000: 590-740 ms of world-stopped marking against
  // 380-420 ms on one) because the shared mark stack never grew in that mode
  // and overflowed hundreds of times; mark_stack.cc grows it now, and
  // gen-overrides 50,000's collection takes 296-353 ms instead of 443-463 ms,
  // --workers 2 over 1 going from 1.37x to 1.46x (pkgset 1.51x to 1.64x;
  // bench/README.md, issue 36). Costs up to ~20 MB of peak RSS: that mode's
  // mark stack pages are not given back. One evaluating thread keeps one
  // marker.
  evalThreads = std::max(threads, 1u);
}

// Collections start once kGcEvery bytes were allocated since the last one,
// and then, with a free-space divisor of 1, not before as much was
// allocated as survived (half as much once the heap passes kLargeHeap):
// small evaluations never collect and loops that churn memory stay within
// a few hundred MiB. KILN_GC_EVERY=BYTES makes tests collect that often.
void initGarbageCollector() {
  static std::once_flag once;
  std::call_once(once, [] {
    // tcmalloc gives free spans back to the system at once instead of
    // keeping them resident for reuse: spans freed and not asked for again
    // (parse temporaries, outgrown tables) were ~1 MB of a small run's peak
    // (gen-scopes 10,000 84.9 -> 83.8 MB; no change in user or system
    // time at gen-pkgset 50,000: docs/evaluator.md).
    if (MallocExtension_SetNumericProperty)
      MallocExtension_SetNumericProperty("tcmalloc.aggressive_memory_decommit", 1);
    GC_set_handle_fork(1);  // job workers fork
    // One marker, no helper threads, but with evaluating threads
    // (setCollectorForThreads).
    GC_set_markers_count(evalThreads > 1 ? 2 : 1);
    GC_INIT();
    shapeSizeClasses();
    GC_set_on_heap_resize([](GC_word heapBytes) {
      onHeapGrowth();  // new heap sections
      if (largeHeap && freeSpaceDivisorFor(heapBytes, largeHeap) != 1)
        GC_set_free_space_divisor(freeSpaceDivisorFor(heapBytes, largeHeap));
    });
    if (evalStatsRequested()) startCollectionTimer();
    const char* every = std::getenv("KILN_GC_EVERY");
    // A heap with free space is used before collecting: none for tests.
    if (!every && !std::getenv("GC_INITIAL_HEAP_SIZE"))
      GC_expand_hp(kInitialHeap);
    // With KILN_GC_EVERY (tests), collect every that many bytes, whatever
    // survived. KILN_GC_DIVISOR=N: another free-space divisor (to measure the
    // policy).
    const char* divisor = std::getenv("KILN_GC_DIVISOR");
    GC_set_free_space_divisor(
        every ? 100000
        : divisor
            ? std::max<unsigned long>(std::strtoul(divisor, nullptr, 10), 1)
            : 1);
    // The large-heap divisor, with one evaluating thread and no divisor
    // set; KILN_GC_LARGE_HEAP=BYTES: another heap size for it (0: never).
    const char* large = std::getenv("KILN_GC_LARGE_HEAP");
    CollectorPolicy policy = collectorPolicyFor(evalThreads);
    largeHeap = every || divisor ? 0
                : large          ? std::strtoull(large, nullptr, 10)
                                 : policy.largeHeap;
    // KILN_GC_THRESHOLD=BYTES: another threshold (to measure the policy).
    const char* threshold = std::getenv("KILN_GC_THRESHOLD");
    size_t first = policy.firstCollection;
    if (threshold)
      first = std::max<size_t>(std::strtoull(threshold, nullptr, 10), 4096);
    GC_set_min_bytes_allocd(
        every ? std::max<size_t>(std::strtoull(every, nullptr, 10), 4096)
              : first);
    // KILN_GC_MARK_STACK=ENTRIES: a bigger initial mark stack than the
    // 1,048,576 entries libgc is built with (a smaller one changes nothing).
    const char* marks = std::getenv("KILN_GC_MARK_STACK");
    // Grown before GC_allow_register_threads, which starts libgc's marker
    // helper: on one marker each doubling is one plain overflow, where the
    // parallel mode's shared stack needs local stacks flooded into it
    // (mark_stack.cc; ~50 ms of every `--workers 2` start on 2 cores).
    // The helper then marks with the shared stack, the same array, grown.
    growMarkStack(marks ? std::strtoull(marks, nullptr, 10) : 0);
    GC_allow_register_threads();
  });
}

}  // namespace kiln::eval
