#pragma once
// The Boehm collector as the evaluator uses it (docs/evaluator.md,
// "Memory"). Included only by the evaluator's own sources: with GC_THREADS,
// pthread_create in them registers the new thread with the collector.
#define GC_THREADS
#include <gc/gc.h>
#include <gc/gc_allocator.h>

#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::eval {

/// Asks the kernel for transparent huge pages on every anonymous private
/// read-write mapping of at least 2 MiB (huge_pages.cc): the collector's
/// heap calls it whenever it grows. Allocates nothing; a no-op where huge
/// pages are unavailable or with KILN_NO_HUGE_PAGES set.
void adviseHugePages();
/// The same for the memory [p, p + n) (an arena chunk).
void adviseHugePages(void* p, size_t n);

/// Containers whose storage the collector scans: for values that may be
/// referred to from nowhere else while a builtin works (heap memory from
/// std::allocator is invisible to the collector).
template <class T>
using TracedVector = std::vector<T, traceable_allocator<T>>;
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
