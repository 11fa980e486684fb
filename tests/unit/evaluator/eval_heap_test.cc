// EvalHeap's own allocation lists (eval_heap.cc): one evaluating thread's
// sets, lists and environments come from GC_malloc_many lists, its strings
// and context arrays from lists of atomic objects, which a collection frees
// behind their heads (their links are in memory the collector does not
// scan) and which EvalHeap therefore drops when a collection starts.
#include "gc_support.h"  // first: GC_THREADS before any libgc header

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "eval_parts.h"

namespace kiln::eval {
namespace {

// The text of string `i`, of 1 to 300 bytes (sizes of one to nineteen
// 16-byte granules, each size many times).
std::string textOf(size_t i) {
  std::string s = std::to_string(i) + ":";
  s.resize(std::max(s.size(), 1 + (i * 37) % 300), static_cast<char>('a' + i % 26));
  return s;
}

// Strings kept across collections stay as they were made while more are
// made (and dropped) after each collection: no string's memory is handed
// out twice. Fails when EvalHeap keeps using an atomic list across a
// collection (the list's objects past its head are free by then, and the
// collector hands them out again).
TEST(EvalHeapLists, StringsKeptAcrossCollectionsAreNotHandedOutAgain) {
  EvalState st;
  // Traced: the collector sees the kept strings through this vector.
  std::vector<const char*, traceable_allocator<const char*>> kept;
  size_t made = 0;
  for (int round = 0; round < 40; ++round) {
    for (int j = 0; j < 400; ++j, ++made) {
      std::string t = textOf(made);
      const char* s = st.heap().copyString(t);
      if (j % 4 == 0) kept.push_back(s);  // the rest is garbage
    }
    GC_gcollect();
  }
  // Strings made after the last collection reuse what it freed.
  for (size_t j = 0; j < 20000; ++j) st.heap().copyString(textOf(made + j));
  size_t k = 0;
  for (size_t i = 0; i < made; ++i) {
    if (i % 400 % 4 != 0) continue;
    ASSERT_EQ(std::string(kept[k]), textOf(i)) << "string " << i;
    ++k;
  }
}

// Sets and lists from the scanned lists come zeroed and stay intact across
// collections, each object its own.
TEST(EvalHeapLists, ListsKeptAcrossCollectionsAreNotHandedOutAgain) {
  EvalState st;
  std::vector<Value**, traceable_allocator<Value**>> kept;
  for (int round = 0; round < 40; ++round) {
    for (size_t n = 1; n <= 60; ++n) {
      Value** l = st.heap().allocList(n);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(l[i], nullptr);
      for (size_t i = 0; i < n; ++i) l[i] = &st.vEmptyAttrs;
      kept.push_back(l);
      st.heap().allocList(n);  // garbage
    }
    GC_gcollect();
  }
  for (Value** l : kept) ASSERT_EQ(l[0], &st.vEmptyAttrs);
  for (size_t k = 0; k < kept.size(); ++k)
    for (size_t i = 0; i < k % 60 + 1; ++i) ASSERT_EQ(kept[k][i], &st.vEmptyAttrs);
}

}  // namespace
}  // namespace kiln::eval
