// Transparent huge pages for the evaluator's memory (docs/evaluator.md,
// "Huge pages"), on request only (KILN_HUGE_PAGES=1). A package set
// touches hundreds of MiB once, page by page; on some VMs each 4 KiB fault
// costs several microseconds of system time (gen-pkgset 50,000 on an older
// host: 5 s of 17.6 s CPU). Where the kernel gives huge pages only on
// request (`madvise` mode), the evaluator then asks for them on the memory
// it fills densely: the collector's heap and the arenas. The same walk of
// the mappings finds new heap sections for the heap warmer.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gc_support.h"

namespace kiln::eval {

namespace {

constexpr uintptr_t kPage = 4096;
constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

// Off unless asked for: on the hosts measured last (docs/evaluator.md,
// "Huge pages") they cost peak RSS and system time and saved no user time;
// on older VMs, where each 4 KiB fault was slow, they saved system time.
bool wanted() {
  static const bool on = [] {
    const char* v = std::getenv("KILN_HUGE_PAGES");
    return v && std::strcmp(v, "1") == 0 && !std::getenv("KILN_NO_HUGE_PAGES");
  }();
  return on;
}

// A set of address ranges, fixed-size (no allocation under the collector).
struct RangeList {
  static constexpr size_t kMax = 1024;
  AddressRange ranges[kMax];
  size_t count = 0;

  bool covers(uintptr_t lo, uintptr_t hi) const {
    for (size_t i = 0; i < count; ++i)
      if (ranges[i].lo <= lo && hi <= ranges[i].hi) return true;
    return false;
  }
  // [lo, hi) less the ranges that overlap either end of it (a mapping the
  // kernel merged with a new one next to it).
  AddressRange uncovered(uintptr_t lo, uintptr_t hi) const {
    for (size_t i = 0; i < count; ++i) {
      if (ranges[i].lo <= lo && lo < ranges[i].hi) lo = ranges[i].hi;
      if (ranges[i].lo < hi && hi <= ranges[i].hi) hi = ranges[i].lo;
    }
    return {lo, hi < lo ? lo : hi};
  }
  void remember(uintptr_t lo, uintptr_t hi) {
    size_t kept = 0;  // drop the ranges inside the new one (merged mappings)
    for (size_t i = 0; i < count; ++i)
      if (!(lo <= ranges[i].lo && ranges[i].hi <= hi))
        ranges[kept++] = ranges[i];
    count = kept;
    if (count < kMax) ranges[count++] = {lo, hi};
  }
};

// The mappings advised since the last collection, so that a heap growth
// advises only what is new: every growth (~85 at gen-pkgset 50,000, each
// under the collector's lock) advised every mapping again, ~6,800 madvise
// calls a run, each taking the address space's lock for writing, which
// page faults of other threads wait for. A collection may unmap heap
// blocks and map them again without the advice, so the list is forgotten
// when the collection count changes. Only the collector's heap-resize
// callback uses it (under the collector's lock): no lock of its own.
RangeList advised;
GC_word advisedAtCollection = ~GC_word{0};
// The mappings of the last scan (`seen`) and of this one (`current`): what
// the last scan did not have is new, and the part of it that is the
// collector's heap goes to the warmer. Only mappings present at the last
// scan count: an address unmapped since may hold a new heap section.
RangeList seen, current;

// One line of /proc/self/maps: advises an anonymous private read-write
// mapping of at least one huge page (the collector's heap sections, the
// arenas' chunks, malloc's heaps), not the main stack.
void adviseMapping(char* line) {
  unsigned long lo = 0, hi = 0, offset = 0, inode = 0;
  char perms[8] = {0};
  unsigned major = 0, minor = 0;
  int pathAt = 0;
  if (std::sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %n", &lo, &hi, perms,
                  &offset, &major, &minor, &inode, &pathAt) < 7)
    return;
  const char* path = line + pathAt;
  bool anonymous =
      inode == 0 && (*path == 0 || std::strcmp(path, "[heap]") == 0);
  if (!anonymous || std::strcmp(perms, "rw-p") != 0 || hi - lo < kHugePage)
    return;
  if (!seen.covers(lo, hi)) {
    // New memory: to the heap warmer when it is a section of the
    // collector's heap: its first block has a header, or the warmer is
    // growing the heap by at least its size (a section mapped right after
    // the last one joins that one's free tail, whose first block alone has
    // a header, and the kernel may merge the mapping with its neighbours).
    AddressRange part = seen.uncovered(lo, hi);
    if (part.hi > part.lo &&
        (GC_is_heap_ptr(reinterpret_cast<void*>(part.lo)) ||
         heapWarmerGrowsBy(part.hi - part.lo)))
      warmHeapSection(part.lo, part.hi);
  }
  current.remember(lo, hi);
  if (!wanted() || advised.covers(lo, hi)) return;
  ::madvise(reinterpret_cast<void*>(lo), hi - lo,
            MADV_HUGEPAGE);  // a hint: errors ignored
  advised.remember(lo, hi);
}

}  // namespace

void onHeapGrowth() {
  if (!wanted() && !heapWarmerRunning()) return;
  // Runs inside the collector (its heap-resize callback): plain system
  // calls and a stack buffer, no allocation.
  // GC_get_gc_no reads the count without the collector's lock (held here).
  if (GC_get_gc_no() != advisedAtCollection) {
    advisedAtCollection = GC_get_gc_no();
    advised.count = 0;
  }
  int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  current.count = 0;
  char buf[16384];
  size_t have = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf + have, sizeof buf - 1 - have);
    if (n <= 0) break;
    have += static_cast<size_t>(n);
    size_t start = 0;
    for (size_t i = 0; i < have; ++i) {
      if (buf[i] != '\n') continue;
      buf[i] = 0;
      adviseMapping(buf + start);
      start = i + 1;
    }
    if (start == 0 && have == sizeof buf - 1)
      have = 0;  // an absurd line: skipped
    std::memmove(buf, buf + start, have - start);
    have -= start;
  }
  ::close(fd);
  seen = current;
}

void adviseHugePages(void* p, size_t n) {
  if (!wanted()) return;
  uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + kPage - 1) & ~(kPage - 1);
  uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n) & ~(kPage - 1);
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
}

}  // namespace kiln::eval
