#pragma once
/// Where an evaluation's memory goes (KILN_EVAL_STATS=1; docs/evaluator.md,
/// "Where the memory goes"): bytes by allocator, the collector's heap and
/// its collections, the arenas, malloc and the process's peak RSS.

#include <cstdint>
#include <iosfwd>

namespace kiln::eval {

class EvalState;

/// Collectable allocations an EvalState made, by kind. Counted only while
/// statistics are requested (EvalState::countAllocations).
struct AllocCounts {
  uint64_t valueBlocks = 0, valueBytes = 0;  ///< blocks of several values each
  uint64_t envs = 0, envBytes = 0;
  uint64_t bindings = 0, bindingsBytes = 0;
  uint64_t lists = 0, listBytes = 0;
  uint64_t strings = 0, stringBytes = 0;    ///< made while evaluating (collectable)
  uint64_t contexts = 0, contextBytes = 0;  ///< context arrays, likewise
  /// Counts by size (env slots, set capacity, list length) in the buckets
  /// 0, 1, 2, 3, 4, 5-8, 9-16, 17-64, 65+ (sizeBucket).
  static constexpr int kBuckets = 9;
  uint64_t envsBySize[kBuckets] = {}, bindingsBySize[kBuckets] = {},
           listsBySize[kBuckets] = {};
  uint64_t parseArenaBytes = 0;  ///< arena growth while parsing files
  /// The bucket of a size.
  static int sizeBucket(uint64_t n) {
    return n <= 4 ? int(n) : n <= 8 ? 5 : n <= 16 ? 6 : n <= 64 ? 7 : 8;
  }
};

/// A snapshot of the evaluator's memory.
struct EvalStats {
  AllocCounts allocs;
  uint64_t arenaBytes = 0;        ///< unscanned arena: AST, strings, contexts
  uint64_t permanentBytes = 0;    ///< scanned arena: base env, builtins, caches
  uint64_t gcHeapBytes = 0;       ///< the collector's heap (mapped)
  uint64_t gcFreeBytes = 0;       ///< of which free
  uint64_t gcTotalAllocated = 0;  ///< bytes allocated by the collector, ever
  uint64_t collections =
      0;  ///< completed collections (the mark stack warm-up's included)
  double collectionSeconds = 0;  ///< CPU time of the collecting thread in them
  unsigned markers = 1;          ///< threads that mark in a collection
  unsigned long freeSpaceDivisor = 1;  ///< the collector's, at the end
  double longestCollection = 0;
  uint64_t mallocInUse = 0;   ///< malloc: bytes in use (mallinfo2)
  uint64_t mallocMapped = 0;  ///< of which in mmapped chunks (glibc)
  const char* mallocName = "glibc";  ///< the allocator in use (static string)
  uint64_t rssBytes = 0, peakRssBytes = 0;  ///< /proc/self/status
  uint64_t liveAfterCollect =
      0;  ///< heap in use after a final collection (0: none made)
  /// After a final collection: reachable objects and their bytes by object
  /// size, in the buckets 16, 32, 48, 64, 80, 96, 112, 128, 129-256,
  /// 257-1024, 1025+ bytes.
  static constexpr int kLiveBuckets = 11;
  uint64_t liveObjects[kLiveBuckets] = {}, liveBytes[kLiveBuckets] = {};
  /// Of those, the atomic ones (strings and context arrays: objects the
  /// collector does not scan).
  uint64_t liveAtomicObjects = 0, liveAtomicBytes = 0;
  /// Bytes free in the blocks that hold those objects (up to 2 KiB: the
  /// collector keeps one object size per block), by the same buckets: the
  /// slots of objects the final collection found dead and each block's
  /// tail too small for one more object. Reused only by objects of that
  /// size.
  uint64_t freeSlotBytes[kLiveBuckets] = {};
};

/// KILN_EVAL_STATS=3: right after a full collection (whose marks it reads), prints a census of the live
/// objects (eval_census.cc): strings by text and their byte-identical
/// copies, context arrays by contents, scanned objects by size.
void printLiveCensus(std::ostream& out);
/// Whether KILN_EVAL_STATS is set to a non-empty value other than "0".
bool evalStatsRequested();
/// Starts timing collections (once per process; called by
/// initGarbageCollector when statistics are requested).
void startCollectionTimer();
/// Takes the snapshot; with `collectFirst`, after a full collection (so
/// liveAfterCollect says what is still reachable).
EvalStats collectEvalStats(EvalState& st, bool collectFirst = false);
/// Prints `s` as "kiln-eval-stats: ..." lines.
void printEvalStats(const EvalStats& s, std::ostream& out);
/// When statistics are requested, prints them for `st` on stderr
/// (KILN_EVAL_STATS=2: after a final full collection, which costs a mark).
void maybePrintEvalStats(EvalState& st);

}  // namespace kiln::eval
