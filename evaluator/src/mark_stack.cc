// The collector's mark stack (docs/evaluator.md, "Garbage collection"):
// its pages given back after each collection's marking, and grown at start
// when asked for more than the collector starts with.
//
// libgc 8.2 doubles its mark stack only after a collection that overflowed
// it; each overflow drops entries and costs a rescan of every marked
// object. gen-pkgset 50,000 overflowed 262,144 entries 10-30 times in its
// main collection (730-810 ms of marking, 450 ms without overflows). kiln
// builds libgc with an initial stack of KILN_GC_INITIAL_MARK_STACK entries
// (1,048,576: cmake/KilnLibgc.cmake); until then libgc started at 4,096
// and kiln grew it in 8 forced collections at start (~15 ms a run). A
// bigger stack (KILN_GC_MARK_STACK) is still grown that way: the stack is
// overflowed on purpose in small collections at start, once each, by a
// filler object of a kind of its own: its mark procedure fills the free
// part of the stack with entries that scan nothing, then pushes one real
// object, which finds the stack full and reports the overflow. That costs
// a few ms and no heap objects (the outgrown stacks become heap blocks).
// A stack used deep stays resident, so after each marking the pages of the
// stack are given back (MADV_DONTNEED): its entries are dead by then, and
// peak RSS does not grow by the deepest marking's stack.
#ifndef KILN_GC_INITIAL_MARK_STACK
#error "KILN_GC_INITIAL_MARK_STACK: libgc's INITIAL_MARK_STACK_SIZE (cmake/KilnLibgc.cmake)"
#endif
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iterator>

#include "gc_support.h"
// gc_support.h first: it sets GC_THREADS for every collector header.
#include <gc/gc_mark.h>

namespace kiln::eval {

namespace {
// The entries libgc's stack starts with; it only ever grows.
constexpr size_t kInitialEntries = KILN_GC_INITIAL_MARK_STACK;
static_assert(kInitialEntries >= 4096 && (kInitialEntries & (kInitialEntries - 1)) == 0);
constexpr GC_word kFillerMagic = 0x6b696c6e6d61726bULL;    // "kilnmark"
constexpr GC_word kMeasureMagic = 0x6b696c6e73697a65ULL;   // "kilnsize"
constexpr GC_word kObserverMagic = 0x6b696c6e6f627376ULL;  // "kilnobsv"
constexpr GC_word kHide = 0x5a5a5a5a5a5a5a5aULL;

// An object of the filler kind. Its first word says what its mark
// procedure does (an object on a free list has a link there, or zero).
struct Filler {
  GC_word magic;
  GC_word leaf;  // the object pushed last, xor kHide: no scan finds it first
};

// libgc's mark stack entry (gc_pmark.h, not installed): start, descriptor.
struct MarkEntry {
  void* start;
  GC_word descr;
};
static_assert(sizeof(MarkEntry) == 2 * sizeof(GC_word));

std::atomic<GC_word> filledInCollection{~GC_word{0}};
// With parallel marking: the filler's own descriptor, and how many more
// entries fillers may push in this collection (see flood).
std::atomic<GC_word> fillerDescr{0};
std::atomic<long> floodBudget{0};
std::atomic<size_t> measuredEntries{0};  // its free part, measured at start
std::atomic<uintptr_t> stackLimit{0};  // its end, seen in this marking (0: not)
// The ranges filled while growing (one per doubling, at most one per
// size): what growMarkStack gives back once libgc recycled them.
struct FilledRange {
  uintptr_t lo, hi;
};
FilledRange filledRanges[48];
std::atomic<size_t> filledCount{0};
// A root (static data: volatile, so the store is kept), marked every
// collection.
Filler* volatile observer = nullptr;
GC_on_collection_event_proc previousOnEvent = nullptr;

// Fills [top + 1, limit - 1] with entries that scan nothing; returns the
// new top.
GC_ms_entry* fill(GC_word* addr, GC_ms_entry* top, GC_ms_entry* limit) {
  auto* entry = reinterpret_cast<MarkEntry*>(top);
  auto* end = reinterpret_cast<MarkEntry*>(limit);
  while (entry + 1 < end)
    *++entry = MarkEntry{addr, GC_DS_BITMAP};  // no pointer words
  return reinterpret_cast<GC_ms_entry*>(entry);
}

// With parallel marking a mark procedure sees a marker's local stack of
// 4,096 entries, and only the shared stack grows, when a local stack
// returned to it finds no room ("No room to copy back mark stack": marks
// dropped, then found again by a rescan of every marked object; ~775 times
// in gen-overrides 50,000's main collection). So the filler fills the
// local stack with entries for itself, each of which fills again when
// popped from a stack with room, until this collection's budget is used:
// the markers hand those stacks back to the shared one, whose entries,
// once taken, stay below its top until the marking ends, so it overflows
// once (libgc doubles it for the next collection).
GC_ms_entry* flood(GC_word* addr, GC_ms_entry* top, GC_ms_entry* limit) {
  auto* entry = reinterpret_cast<MarkEntry*>(top);
  auto* end = reinterpret_cast<MarkEntry*>(limit);
  // Room for the leaf's entry too: an overflow there would drop
  // GC_MARK_STACK_DISCARDS entries (kInitialEntries / 8), more than a
  // local stack holds.
  long room = end - entry - 2;
  // A stack still mostly full of these entries is left as it is: refilling
  // the one slot each pop frees made markers hand back a whole local stack
  // (64 KiB) for every ~40 entries pushed (~70 ms of start-up on 2 cores).
  if (room < 1024) return top;
  long take = std::min(room, floodBudget.load(std::memory_order_relaxed));
  if (take <= 0) return top;
  floodBudget.fetch_sub(take, std::memory_order_relaxed);
  GC_word descr = fillerDescr.load(std::memory_order_relaxed);
  for (long i = 0; i < take; ++i) *++entry = MarkEntry{addr, descr};
  return reinterpret_cast<GC_ms_entry*>(entry);
}

GC_ms_entry* markFiller(GC_word* addr, GC_ms_entry* top, GC_ms_entry* limit,
                        GC_word) {
  auto* filler = reinterpret_cast<Filler*>(addr);
  switch (filler->magic) {
    case kObserverMagic:
      stackLimit.store(reinterpret_cast<uintptr_t>(limit),
                       std::memory_order_relaxed);
      return top;
    case kMeasureMagic: {
      // The free part now: all of it lies in the stack, whatever else
      // libgc keeps below its top or after its limit.
      measuredEntries.store(
          static_cast<size_t>(reinterpret_cast<MarkEntry*>(limit) -
                              reinterpret_cast<MarkEntry*>(top) - 1),
          std::memory_order_relaxed);
      return top;
    }
    case kFillerMagic: {
      if (GC_get_parallel()) {
        top = flood(addr, top, limit);
        void* leaf = reinterpret_cast<void*>(filler->leaf ^ kHide);
        return GC_mark_and_push(leaf, top, limit, reinterpret_cast<void**>(addr));
      }
      GC_word now = GC_get_gc_no();
      if (filledInCollection.exchange(now) != now) {
        size_t n = filledCount.load(std::memory_order_relaxed);
        if (n < std::size(filledRanges)) {
          filledRanges[n] = {reinterpret_cast<uintptr_t>(top), reinterpret_cast<uintptr_t>(limit)};
          filledCount.store(n + 1, std::memory_order_relaxed);
        }
        top = fill(addr, top, limit);
      }
      void* leaf = reinterpret_cast<void*>(filler->leaf ^ kHide);
      return GC_mark_and_push(leaf, top, limit, reinterpret_cast<void**>(addr));
    }
    default:
      return top;
  }
}

// A new object of `kind`; a filler gets a new leaf, made where no pointer
// to it stays in a register or stack slot that the collection scans.
__attribute__((noinline)) Filler* makeFiller(unsigned kind, GC_word magic) {
  auto* filler = static_cast<Filler*>(GC_generic_malloc(sizeof(Filler), kind));
  if (magic == kFillerMagic)
    filler->leaf = reinterpret_cast<GC_word>(GC_MALLOC(sizeof(void*))) ^ kHide;
  filler->magic = magic;
  return filler;
}

// After marking: gives back the pages of the stack's part measured free at
// start, below the end seen in this marking. A stack
// grown in this very marking was recycled into the heap (its old range is
// heap then, and skipped); a bigger one contains the range below its end.
void releaseStackPages() {
  size_t entries = measuredEntries.load(std::memory_order_relaxed);
  uintptr_t end = stackLimit.load(std::memory_order_relaxed);
  if (end == 0 || entries < 65536 || GC_get_parallel()) return;
  uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t lo = (end - entries * sizeof(MarkEntry) + page - 1) & ~(page - 1);
  uintptr_t hi = end & ~(page - 1);
  if (lo >= hi || GC_is_heap_ptr(reinterpret_cast<void*>(lo)) ||
      GC_is_heap_ptr(reinterpret_cast<void*>(hi - 1)))
    return;
  madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

// After a doubling: the stack outgrown was filled (so resident) and then
// recycled by libgc into its heap as a free block. Gives back its pages
// that are still free heap: inside a free block (no header: not a heap
// pointer for GC_is_heap_ptr) or at its start (GC_base finds no object).
// A free block reads as zeros afterwards, as fresh memory does. Growing to
// 1,048,576 entries filled 16 MB of stacks that stayed resident, in every
// evaluation, until the heap reused them.
void releaseOutgrownStacks() {
  uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  size_t n = filledCount.load(std::memory_order_relaxed);
  for (size_t i = 0; i < n; ++i) {
    uintptr_t lo = (filledRanges[i].lo + page - 1) & ~(page - 1);
    uintptr_t hi = filledRanges[i].hi & ~(page - 1);
    uintptr_t run = 0;  // start of the current run of free pages (0: none)
    for (uintptr_t p = lo; p <= hi; p += page) {
      bool free = p < hi && (!GC_is_heap_ptr(reinterpret_cast<void*>(p)) ||
                             GC_base(reinterpret_cast<void*>(p)) == nullptr);
      if (free && !run) run = p;
      if (!free && run) {
        madvise(reinterpret_cast<void*>(run), p - run, MADV_DONTNEED);
        run = 0;
      }
    }
  }
  filledCount.store(0, std::memory_order_relaxed);
}

void onCollectionEvent(GC_EventType event) {
  if (event == GC_EVENT_MARK_START)
    stackLimit.store(0, std::memory_order_relaxed);
  if (event == GC_EVENT_MARK_END) releaseStackPages();
  if (previousOnEvent) previousOnEvent(event);
}
}  // namespace

void growMarkStack(size_t entries) {
  GC_word descr = GC_MAKE_PROC(GC_new_proc(markFiller), 0);
  fillerDescr.store(descr, std::memory_order_relaxed);
  unsigned kind = GC_new_kind(GC_new_free_list(), descr, 0, 1);
  // The free part of the stack at rest: all of it (no collection has run,
  // and a marking's entries are dead once it ends).
  measuredEntries.store(kInitialEntries, std::memory_order_relaxed);
  if (entries > kInitialEntries) {
    for (size_t size = kInitialEntries; size < entries; size *= 2) {
      // More than the shared stack holds: entries taken from it stay below
      // its top until the marking ends, so handing back more than it holds
      // overflows it (a few entries of each local stack are popped there).
      floodBudget.store(static_cast<long>(size + size / 8 + 8192), std::memory_order_relaxed);
      Filler* volatile filler = makeFiller(kind, kFillerMagic);
      GC_gcollect();
      filler->magic = 0;
      releaseOutgrownStacks();  // each as it is outgrown: no two resident at once
    }
    floodBudget.store(0, std::memory_order_relaxed);
    // A doubling libgc could not make leaves a smaller stack than asked
    // for: measured, not assumed.
    Filler* volatile measure = makeFiller(kind, kMeasureMagic);
    GC_gcollect();
    measure->magic = 0;
  }
  observer = makeFiller(kind, kObserverMagic);
  previousOnEvent = GC_get_on_collection_event();
  GC_set_on_collection_event(onCollectionEvent);
}

}  // namespace kiln::eval
