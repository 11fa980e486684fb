// The heap warmer (docs/evaluator.md, "Parallel evaluation"): while two or
// more threads evaluate, a helper thread populates the collector's new heap
// sections before the allocator reaches them.
//
// The collector builds a fresh heap block's free list under its lock (and
// the gate, gc_gate.cc), and that is the first touch of the block's memory:
// the kernel then clears a whole 2 MiB huge page, ~1.7 ms on the VMs kiln
// runs on. The other threads wait for it: at gen-pkgset 50,000 with two
// threads, ~0.9 s of page clearing under the gate and ~0.8 s of threads
// asleep on it (perf sched). The warmer clears the same pages with
// MADV_POPULATE_WRITE, holding no lock, on whichever core is free; the
// allocator, which takes a new section from its start, finds them present.
// Populating changes no contents (absent pages are zero either way).
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <system_error>
#include <thread>

#include "gc_support.h"
#include "kiln/evaluator/eval_state.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

namespace kiln::eval {

namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
// The allocator starts on a new section's first huge page as soon as the
// section exists: the warmer starts after it.
constexpr uintptr_t kLead = kHugePage;
// How far ahead of the allocator the warmer goes: a section's tail the
// allocator never reaches would only add to the peak RSS.
constexpr size_t kAhead = size_t{16} << 20;
// The heap is grown by kStep at a time when less than kLow of it is free.
constexpr size_t kLow = size_t{16} << 20;
constexpr size_t kStep = size_t{64} << 20;
constexpr auto kPoll = std::chrono::milliseconds(5);

// What the heap-resize callback (an allocating thread, under the
// collector's lock: must not allocate) hands the warmer thread.
struct Warmer {
  std::mutex mu;
  std::condition_variable wake;
  AddressRange pending{0, 0};  // the newest section not yet taken (empty: none)
  bool running = false;
  bool stop = false;
  bool unsupported = false;  // MADV_POPULATE_WRITE refused: kernel < 5.14
  std::thread thread;
  std::atomic<uint64_t> populated{0}, grown{0};  // heapWarmerStats
};

Warmer& warmer() {
  static Warmer* w = new Warmer;  // never destroyed: a callback may run at exit
  return *w;
}

bool disabled() {
  static const bool off = std::getenv("KILN_NO_HEAP_WARMER") != nullptr;
  return off;
}

std::atomic<bool> growing{false};  // growAhead is in GC_expand_hp

// The collector's figures the warmer works from (its lock, briefly, behind
// the gate like every evaluating thread's calls).
struct Usage {
  size_t free = 0, sinceCollection = 0;
};

Usage usage() {
  GC_word free = 0, since = 0;
  withCollectorGate([&] {
    GC_get_heap_usage_safe(nullptr, &free, nullptr, &since, nullptr);
  });
  return {free, since};
}

// Grows the heap by kStep when little of it is free and the collector,
// out of free blocks, would grow it rather than collect (fewer bytes were
// allocated since the last collection than it waits for): libgc grows it
// by a few MiB as the allocator runs out, and the allocator takes the new
// section at once, before the warmer could populate it.
void growAhead(Warmer& w, const Usage& u) {
  size_t collectAfter = GC_get_min_bytes_allocd();
  if (u.free >= kLow || u.sinceCollection + kStep + kLow >= collectAfter)
    return;
  // The heap-resize callback passes the new section to warmHeapSection.
  // Under the gate no other thread grows the heap meanwhile.
  if (withCollectorGate([] {
        growing.store(true, std::memory_order_relaxed);
        int grew = GC_expand_hp(kStep);
        growing.store(false, std::memory_order_relaxed);
        return grew;
      }))
    w.grown.fetch_add(kStep, std::memory_order_relaxed);
}

// One huge page at `p`. Returns false when the kernel refuses
// MADV_POPULATE_WRITE altogether; other errors (memory the collector
// unmapped meanwhile) leave the page to the allocator's fault.
bool populatePage(uintptr_t p, size_t n) {
  if (::madvise(reinterpret_cast<void*>(p), n, MADV_POPULATE_WRITE) == 0)
    return true;
  return errno != EINVAL;
}

// Whether the allocator has reached [p, p + 64 KiB) of a section: one of
// its blocks holds an object (a few, in case one is black-listed and
// skipped). Under the gate, where the headers it reads do not change.
bool allocatorReached(uintptr_t p) {
  return withCollectorGate([p] {
    for (uintptr_t q = p; q < p + (uintptr_t{64} << 10); q += 4096)
      if (GC_base(reinterpret_cast<void*>(q))) return true;
    return false;
  });
}

// The warmer's loop: every kPoll, grows the heap ahead when needed and
// populates the newest section, at most kAhead past the allocator. libgc
// puts a new section first in its free list and allocates from it at
// once, from its start, leaving what is left of older ones for later: the
// warmer drops those, as populating them would only add to the peak RSS
// for now.
void run(Warmer& w) {
  AddressRange cur{0, 0};
  uintptr_t next = 0;  // cur's first page not populated
  for (;;) {
    // Before w.mu: the heap-resize callback takes them the other way round.
    growAhead(w, usage());
    std::unique_lock<std::mutex> lock(w.mu);
    if (w.stop) return;
    if (w.pending.hi > w.pending.lo) {  // the allocator is there now
      cur = w.pending;
      w.pending = {0, 0};
      next = cur.lo;
    }
    lock.unlock();
    for (; next < cur.hi; next += kHugePage) {
      if (next >= cur.lo + kAhead && !allocatorReached(next - kAhead)) break;
      size_t n = std::min<uintptr_t>(kHugePage, cur.hi - next);
      if (populatePage(next, n)) {
        w.populated.fetch_add(n, std::memory_order_relaxed);
        continue;
      }
      lock.lock();
      w.unsupported = true;  // nothing is handed to it again
      return;
    }
    lock.lock();
    if (w.stop) return;
    w.wake.wait_for(lock, kPoll);
  }
}

}  // namespace

void startHeapWarmer() {
  if (disabled()) return;
  Warmer& w = warmer();
  std::lock_guard<std::mutex> lock(w.mu);
  if (w.running || w.unsupported) return;
  w.stop = false;
  w.pending = {0, 0};
  try {
    w.thread = std::thread([&w] { run(w); });
  } catch (const std::system_error&) {
    return;  // no thread: the allocator touches the pages itself
  }
  w.running = true;
}

void stopHeapWarmer() {
  Warmer& w = warmer();
  {
    std::lock_guard<std::mutex> lock(w.mu);
    if (!w.running) return;
    w.stop = true;
    w.running = false;
  }
  w.wake.notify_one();
  w.thread.join();
}

bool heapWarmerRunning() {
  Warmer& w = warmer();
  std::lock_guard<std::mutex> lock(w.mu);
  return w.running && !w.unsupported;
}

bool heapWarmerGrowsBy(size_t bytes) {
  return growing.load(std::memory_order_relaxed) && bytes >= kStep;
}

HeapWarmerStats heapWarmerStats() {
  Warmer& w = warmer();
  return {w.populated.load(std::memory_order_relaxed),
          w.grown.load(std::memory_order_relaxed)};
}

void warmHeapSection(uintptr_t lo, uintptr_t hi) {
  Warmer& w = warmer();
  lo = (lo + kLead + kHugePage - 1) & ~(kHugePage - 1);
  if (hi <= lo) return;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    if (!w.running || w.unsupported) return;
    w.pending = {lo, hi};
  }
  w.wake.notify_one();
}

}  // namespace kiln::eval
