// KILN_EVAL_STATS: the memory report counts what an evaluation allocates,
// by kind and size, and what a final collection finds reachable.
#include "kiln/evaluator/eval_stats.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "eval_parts.h"
#include "eval_test_util.h"

namespace kiln::eval {
namespace {

class EvalStatsTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("KILN_EVAL_STATS", "1", 1); }
  void TearDown() override { unsetenv("KILN_EVAL_STATS"); }
};

// The collector's free-space divisor is 1 below the large-heap bound and
// 2 from it on; a bound of 0 never changes it (gc_setup.cc).
TEST(FreeSpaceDivisor, IsTwoFromTheLargeHeapBoundOn) {
  constexpr size_t kMiB = size_t{1} << 20;
  EXPECT_EQ(freeSpaceDivisorFor(64 * kMiB, 256 * kMiB), 1u);
  EXPECT_EQ(freeSpaceDivisorFor(256 * kMiB - 1, 256 * kMiB), 1u);
  EXPECT_EQ(freeSpaceDivisorFor(256 * kMiB, 256 * kMiB), 2u);
  EXPECT_EQ(freeSpaceDivisorFor(4096 * kMiB, 256 * kMiB), 2u);
  EXPECT_EQ(freeSpaceDivisorFor(4096 * kMiB, 0), 1u);
}

// One evaluating thread collects alike with or without `--workers 1`: first
// at 80 MiB, divisor 2 from 256 MiB (before, `--workers 1` waited for 512
// MiB, without the large-heap divisor). Two threads or more wait for 256
// MiB, divisor 1 throughout (gc_setup.cc).
TEST(CollectorPolicy, OneThreadCollectsAsOneProcess) {
  constexpr size_t kMiB = size_t{1} << 20;
  CollectorPolicy one = collectorPolicyFor(1);
  EXPECT_EQ(one.firstCollection, 80 * kMiB);
  EXPECT_EQ(one.largeHeap, 256 * kMiB);
  EXPECT_EQ(collectorPolicyFor(0).firstCollection, one.firstCollection);
  EXPECT_EQ(collectorPolicyFor(0).largeHeap, one.largeHeap);
  for (unsigned threads : {2u, 4u}) {
    EXPECT_EQ(collectorPolicyFor(threads).firstCollection, 256 * kMiB);
    EXPECT_EQ(collectorPolicyFor(threads).largeHeap, 0u);
  }
}

TEST_F(EvalStatsTest, CountsAllocationsByKindAndSize) {
  EvalState st;
  ASSERT_NE(st.heap().counts(), nullptr);
  AllocCounts before = *st.heap().counts();
  // 2,000 calls of a one-argument lambda (one-variable envs), a set of
  // 100 attributes, a list of 2,000 elements and 2,000 empty lists made
  // at run time.
  EXPECT_EQ(testing::evalStrict(st, R"(
    let xs = builtins.genList (i: i) 2000;
        s = builtins.listToAttrs (map (i: { name = "a${toString i}"; value = i; })
                                      (builtins.genList (i: i) 100));
        es = map (x: builtins.genList (j: j) 0) xs;
    in builtins.length (builtins.attrNames s) + builtins.length es
      + builtins.length (builtins.concatLists es)
      + builtins.foldl' (a: b: a + b) 0 xs)"),
            "2001100");
  const AllocCounts& a = *st.heap().counts();
  EXPECT_GE(a.envsBySize[1] - before.envsBySize[1], 2000u);
  EXPECT_GE(a.bindingsBySize[8] - before.bindingsBySize[8],
            1u);                                            // 65+ attributes
  EXPECT_GE(a.listsBySize[8] - before.listsBySize[8], 2u);  // 65+ elements
  EXPECT_GE(a.listsBySize[0] - before.listsBySize[0], 2000u);
  EXPECT_GT(a.envBytes, before.envBytes);
  EXPECT_GT(a.valueBlocks, before.valueBlocks);
  EXPECT_EQ(a.valueBytes % a.valueBlocks, 0u);
}

TEST_F(EvalStatsTest, SnapshotIsConsistentAfterAFinalCollection) {
  EvalState st;
  // The base environment is made in the arena, before collection starts:
  // only what the evaluation allocates is in the collector's total.
  EvalStats s0 = collectEvalStats(st);
  testing::evalStrict(
      st, "builtins.length (builtins.genList (i: { x = i; }) 10000)");
EvalStats s = collectEvalStats(st, true);
  EXPECT_GT(s.liveAfterCollect, 0u);
  uint64_t reachable = 0;
  for (uint64_t b : s.liveBytes) reachable += b;
  EXPECT_GT(reachable, 0u);
  EXPECT_LE(reachable, s.gcHeapBytes);
  // The blocks holding reachable objects are in use: what is reachable
  // plus their free slots cannot exceed what is in use.
  uint64_t freeSlots = 0;
  for (uint64_t b : s.freeSlotBytes) freeSlots += b;
  EXPECT_GT(freeSlots, 0u);  // 10,000 sets of one attribute do not fill whole blocks
  EXPECT_LE(reachable + freeSlots, s.liveAfterCollect);
  EXPECT_LE(s.gcFreeBytes, s.gcHeapBytes);
  EXPECT_GE(s.gcTotalAllocated - s0.gcTotalAllocated,
            (s.allocs.bindingsBytes - s0.allocs.bindingsBytes) +
                (s.allocs.listBytes - s0.allocs.listBytes));
  EXPECT_GT(s.arenaBytes, 0u);
  EXPECT_GT(s.rssBytes, 0u);
  EXPECT_GE(s.peakRssBytes, s.rssBytes);
  std::ostringstream out;
  printEvalStats(s, out);
  EXPECT_NE(out.str().find("kiln-eval-stats: gc heap "), std::string::npos);
  EXPECT_NE(out.str().find("live after a final collection"), std::string::npos);
  EXPECT_NE(out.str().find("free slots in blocks holding live objects"), std::string::npos);
}

TEST_F(EvalStatsTest, CensusCountsByteIdenticalStringsAndContextArrays) {
  EvalState st;
  Value v;
  runWithLargeStack([&] {
    // 300 copies of one 40-character text (made at run time) and strings
    // with the context of two derivations: one context array each.
    st.eval(st.parseExprFromString(R"(
      let d = n: derivation { name = n; system = "x"; builder = "/b"; };
          a = d "a"; b = d "b";
      in { copies = builtins.genList (i: builtins.substring 0 40
             "census-text-of-forty-characters-exactly-0123") 300;
           both = builtins.genList (i: "${a}${b}${toString i}") 50; })",
                                   "/tmp"),
            v);
    st.forceValueDeep(v);
    collectEvalStats(st, true);  // the final collection the census reads
    std::ostringstream out;
    printLiveCensus(out);
    const std::string text = out.str();
    EXPECT_NE(text.find("census: strings "), std::string::npos) << text;
    EXPECT_NE(text.find("text x300 "), std::string::npos) << text;
    EXPECT_NE(text.find("census-text-of-forty-characters-exactly"), std::string::npos);
    EXPECT_NE(text.find("census: context arrays "), std::string::npos);
    EXPECT_EQ(text.find("census: context arrays 0/"), std::string::npos) << text;
    EXPECT_NE(text.find("census: scanned objects by size:"), std::string::npos);
  });
}

TEST(EvalStatsOff, NothingIsCountedWithoutTheVariable) {
  unsetenv("KILN_EVAL_STATS");
  EXPECT_FALSE(evalStatsRequested());
  EvalState st;
  EXPECT_EQ(st.heap().counts(), nullptr);
}

}  // namespace
}  // namespace kiln::eval
