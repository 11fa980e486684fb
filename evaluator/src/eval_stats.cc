// KILN_EVAL_STATS: where an evaluation's memory goes (eval_stats.h).
#include "kiln/evaluator/eval_stats.h"

#include "gc_support.h"  // first: GC_THREADS before any libgc header
#include "eval_parts.h"
#include <gc/gc_inline.h>  // GC_I_PTRFREE
#include <gc/gc_mark.h>
#include <malloc.h>
#include <time.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "gc_support.h"
#include "kiln/evaluator/eval_state.h"

// tcmalloc's statistics, when the executable links it (cli/CMakeLists.txt):
// weak, so that programs on glibc's malloc (the tests) link without it.
extern "C" int MallocExtension_GetNumericProperty(const char* property, size_t* value)
    __attribute__((weak));

namespace kiln::eval {

namespace {
// Written by the collection event callback (collector lock held, so one
// collection at a time); read when printing.
std::atomic<uint64_t> gCollections{0};
std::atomic<uint64_t> gCollectionNanos{0};
std::atomic<uint64_t> gLongestNanos{0};
uint64_t gStartNanos = 0;

// CPU time of the collecting thread (with one marker, the collection's
// work; wall time on a loaded machine says little).
uint64_t nowNanos() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// Must not allocate (called with the collector's lock held).
void onCollectionEvent(GC_EventType e) {
  if (e == GC_EVENT_START) {
    gStartNanos = nowNanos();
  } else if (e == GC_EVENT_END && gStartNanos) {
    uint64_t d = nowNanos() - gStartNanos;
    gStartNanos = 0;
    gCollections.fetch_add(1, std::memory_order_relaxed);
    gCollectionNanos.fetch_add(d, std::memory_order_relaxed);
    if (d > gLongestNanos.load(std::memory_order_relaxed))
      gLongestNanos.store(d, std::memory_order_relaxed);
  }
}

// A "NAME:   N kB" line of /proc/self/status, in bytes (0 if absent).
uint64_t statusBytes(const std::string& status, const char* name) {
  size_t at = status.find(name);
  if (at == std::string::npos) return 0;
  return std::strtoull(status.c_str() + at + std::strlen(name), nullptr, 10) *
         1024;
}

std::string buckets(const uint64_t (&n)[AllocCounts::kBuckets]) {
  std::string out;
  for (uint64_t x : n) out += " " + std::to_string(x);
  return out;
}

std::string mb(uint64_t bytes) {
  return std::to_string((bytes + (1 << 19)) >> 20) + " MB";
}
}  // namespace

namespace {
int liveBucket(size_t bytes) {
  if (bytes <= 128)
    return int((bytes + 15) / 16) - 1 < 0 ? 0 : int((bytes + 15) / 16) - 1;
  return bytes <= 256 ? 8 : bytes <= 1024 ? 9 : 10;
}

// The collector's block size (HBLKSIZE, 4 KiB in libgc's default
// configuration); objects up to half of it share blocks of one size.
constexpr uint64_t kBlockBytes = 4096;

// What countReachable gathers: per object size and kind, the objects
// found and the distinct blocks they are in (small objects only).
struct Reachable {
  EvalStats* stats;
  struct SizeClass {
    uint64_t objects = 0;
    std::unordered_set<uintptr_t> blocks;
  };
  std::unordered_map<uint64_t, SizeClass> bySizeAndKind;  // key: bytes * 4 + kind
};

// The free slots (and unusable tails) of the blocks holding `c`'s objects
// of `bytes` each: a block of a size class takes objects of that size only.
uint64_t freeSlotBytes(uint64_t bytes, const Reachable::SizeClass& c) {
  return c.blocks.size() * kBlockBytes - c.objects * bytes;
}

// Counts the objects the last collection found reachable, by size, and
// the free slots left in the blocks that hold them.
void countReachable(EvalStats& s) {
  Reachable r{&s, {}};
  GC_call_with_alloc_lock(
      [](void* data) -> void* {
        GC_enumerate_reachable_objects_inner(
            [](void* obj, size_t bytes, void* d) {
              auto* r = static_cast<Reachable*>(d);
              EvalStats* st = r->stats;
              int b = liveBucket(bytes);
              ++st->liveObjects[b];
              st->liveBytes[b] += bytes;
              int kind = GC_get_kind_and_size(obj, nullptr);
              if (kind == GC_I_PTRFREE) {
                ++st->liveAtomicObjects;
                st->liveAtomicBytes += bytes;
              }
              if (bytes > kBlockBytes / 2) return;
              auto& c = r->bySizeAndKind[uint64_t(bytes) * 4 + unsigned(kind & 3)];
              ++c.objects;
              c.blocks.insert(reinterpret_cast<uintptr_t>(obj) & ~uintptr_t(kBlockBytes - 1));
            },
            data);
        return nullptr;
      },
      &r);
  for (auto& [key, c] : r.bySizeAndKind)
    s.freeSlotBytes[liveBucket(key / 4)] += freeSlotBytes(key / 4, c);
}
}  // namespace

bool evalStatsRequested() {
  const char* v = std::getenv("KILN_EVAL_STATS");
  return v && *v && std::strcmp(v, "0") != 0;
}

void startCollectionTimer() {
  static std::once_flag once;
  std::call_once(once, [] { GC_set_on_collection_event(onCollectionEvent); });
}

EvalStats collectEvalStats(EvalState& st, bool collectFirst) {
  EvalStats s;
  if (collectFirst) {
    GC_gcollect();
    GC_word heap = 0, free = 0;
    GC_get_heap_usage_safe(&heap, &free, nullptr, nullptr, nullptr);
    s.liveAfterCollect = heap - free;  // both without unmapped memory
    countReachable(s);
  }
  if (const AllocCounts* c = st.heap().counts()) s.allocs = *c;
  s.arenaBytes = st.arena.bytesReserved();
  s.permanentBytes = st.permanent.bytesReserved();
  GC_word heap = 0, free = 0;
  GC_get_heap_usage_safe(&heap, &free, nullptr, nullptr, nullptr);
  s.gcHeapBytes = heap;  // without unmapped memory
  s.gcFreeBytes = free;
  s.gcTotalAllocated = GC_get_total_bytes();
  s.collections = gCollections.load();
  s.markers = unsigned(GC_get_parallel()) + 1;  // helpers + the collector
  s.freeSpaceDivisor = GC_get_free_space_divisor();
  s.collectionSeconds = double(gCollectionNanos.load()) / 1e9;
  s.longestCollection = double(gLongestNanos.load()) / 1e9;
  size_t tcInUse = 0;
  if (MallocExtension_GetNumericProperty &&
      MallocExtension_GetNumericProperty("generic.current_allocated_bytes", &tcInUse)) {
    s.mallocInUse = tcInUse;  // the kiln executable's tcmalloc
    size_t decommit = 0;
    MallocExtension_GetNumericProperty("tcmalloc.aggressive_memory_decommit", &decommit);
    s.mallocName = decommit ? "tcmalloc, aggressive decommit" : "tcmalloc";
  } else {
    struct mallinfo2 mi = mallinfo2();
    s.mallocInUse = mi.uordblks + mi.hblkhd;
    s.mallocMapped = mi.hblkhd;
  }
  std::ifstream f("/proc/self/status");
  std::string status((std::istreambuf_iterator<char>(f)),
                     std::istreambuf_iterator<char>());
  s.rssBytes = statusBytes(status, "VmRSS:");
  s.peakRssBytes = statusBytes(status, "VmHWM:");
  return s;
}

void printEvalStats(const EvalStats& s, std::ostream& out) {
  const AllocCounts& a = s.allocs;
  const char* p = "kiln-eval-stats: ";
  out << p << "rss " << mb(s.rssBytes) << ", peak " << mb(s.peakRssBytes)
      << "\n"
      << p << "gc heap " << mb(s.gcHeapBytes) << " (free " << mb(s.gcFreeBytes)
      << "), allocated in total " << mb(s.gcTotalAllocated) << "\n"
      << p << "collections " << s.collections << ", " << s.collectionSeconds
      << " s CPU (longest " << s.longestCollection
      << " s), free-space divisor " << s.freeSpaceDivisor << ", markers "
      << s.markers << "\n";
  if (s.liveAfterCollect) {
    out << p << "live after a final collection " << mb(s.liveAfterCollect)
        << "; by object size (16,32,48,64,80,96,112,128,-256,-1024,more):";
    for (int i = 0; i < EvalStats::kLiveBuckets; ++i)
      out << " " << s.liveObjects[i] << "/" << mb(s.liveBytes[i]);
    out << "; of it atomic (strings, contexts) " << s.liveAtomicObjects << "/"
        << mb(s.liveAtomicBytes) << "\n"
        << p << "free slots in blocks holding live objects, by object size (same buckets):";
    uint64_t freeSlots = 0;
    for (int i = 0; i < EvalStats::kLiveBuckets; ++i) {
      out << " " << mb(s.freeSlotBytes[i]);
      freeSlots += s.freeSlotBytes[i];
    }
    out << "; " << mb(freeSlots) << " in all\n";
  }
  out << p << "allocated: values " << mb(a.valueBytes) << " (" << a.valueBlocks
      << " blocks), envs " << mb(a.envBytes) << " (" << a.envs << "), bindings "
      << mb(a.bindingsBytes) << " (" << a.bindings << "), lists "
      << mb(a.listBytes) << " (" << a.lists << "), strings " << mb(a.stringBytes) << " ("
      << a.strings << "), contexts " << mb(a.contextBytes) << " (" << a.contexts << ")\n"
      << p << "by size (0,1,2,3,4,5-8,9-16,17-64,65+): envs"
      << buckets(a.envsBySize) << "; bindings" << buckets(a.bindingsBySize)
      << "; lists" << buckets(a.listsBySize) << "\n"
      << p << "arena " << mb(s.arenaBytes) << " (parsing "
      << mb(a.parseArenaBytes) << ")"
      << " (AST, literal strings, derivations' paths), permanent " << mb(s.permanentBytes) << "\n"
      << p << "malloc (" << s.mallocName << ") in use " << mb(s.mallocInUse) << " (mmapped "
      << mb(s.mallocMapped) << ")\n";
}

void maybePrintEvalStats(EvalState& st) {
  if (!evalStatsRequested()) return;
  const char* v = std::getenv("KILN_EVAL_STATS");
  EvalStats s = collectEvalStats(st, std::strcmp(v, "2") >= 0);
  if (std::strcmp(v, "3") == 0) printLiveCensus(std::cerr);  // the final collection's marks
  printEvalStats(s, std::cerr);
}

}  // namespace kiln::eval
