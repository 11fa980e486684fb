// EntrySplitter: every index once, blocks far apart, stealing from the back.
// SplitTasks: a split set's tasks to its splitter first, to others once
// they have no entries left.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <thread>
#include <vector>

#include "kiln/evaluator/job_threads.h"

namespace kiln::eval {
namespace {

std::vector<size_t> drain(EntrySplitter& s, unsigned part) {
  std::vector<size_t> got;
  while (auto i = s.next(part)) got.push_back(*i);
  return got;
}

TEST(EntrySplitter, OnePartHandsOutEveryIndexInOrder) {
  EntrySplitter s(5, 1);
  EXPECT_EQ(drain(s, 0), (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_FALSE(s.next(0));
}

TEST(EntrySplitter, EachPartStartsAtTheFrontOfItsOwnBlock) {
  EntrySplitter s(10, 2);
  EXPECT_EQ(*s.next(0), 0u);
  EXPECT_EQ(*s.next(1), 5u);
  EXPECT_EQ(*s.next(1), 6u);
  EXPECT_EQ(*s.next(0), 1u);
}

TEST(EntrySplitter, AnEmptyBlockStealsFromTheBackOfTheFullest) {
  EntrySplitter s(9, 3);  // blocks [0,3) [3,6) [6,9)
  for (int k = 0; k < 3; ++k) s.next(0);
  EXPECT_EQ(*s.next(2), 6u);
  EXPECT_EQ(*s.next(0), 5u);  // block 1 has 3 left, block 2 has 2
  EXPECT_EQ(*s.next(0), 4u);  // both have 2 left: the first of them
}

TEST(EntrySplitter, NoIndexesAndMorePartsThanIndexes) {
  EntrySplitter none(0, 4);
  EXPECT_FALSE(none.next(0));
  EXPECT_FALSE(none.next(3));
  EntrySplitter few(2, 4);
  std::vector<size_t> got = drain(few, 3);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<size_t>{0, 1}));
}

TEST(EntrySplitter, ConcurrentThreadsGetEveryIndexExactlyOnce) {
  constexpr size_t kN = 200000;
  for (unsigned parts : {2u, 3u, 8u}) {
    EntrySplitter s(kN, parts);
    std::vector<std::vector<size_t>> got(parts);
    std::vector<std::thread> threads;
    for (unsigned p = 0; p < parts; ++p)
      threads.emplace_back([&, p] { got[p] = drain(s, p); });
    for (auto& t : threads) t.join();
    std::vector<size_t> all;
    for (auto& g : got) all.insert(all.end(), g.begin(), g.end());
    std::sort(all.begin(), all.end());
    ASSERT_EQ(all.size(), kN) << parts;
    for (size_t i = 0; i < kN; ++i) ASSERT_EQ(all[i], i) << parts;
  }
}

TEST(SplitTasks, ASetsTasksGoToItsSplitterWhileOthersHaveEntries) {
  SplitTasks t;
  EXPECT_EQ(t.add(3, 1), 0u);  // thread 1 split a set: tasks 0, 1, 2
  EXPECT_FALSE(t.next(2, true));  // thread 2 still has entries: walks them
  EXPECT_EQ(*t.next(1, true), 0u);
  EXPECT_EQ(*t.next(1, false), 1u);
  EXPECT_EQ(*t.next(2, false), 2u);  // thread 2 out of entries: joins in
  EXPECT_FALSE(t.next(1, false));
  EXPECT_FALSE(t.next(2, false));
}

TEST(SplitTasks, OwnSetsFirstThenTheEarliestSplitFromTheFront) {
  SplitTasks t;
  EXPECT_EQ(t.add(2, 1), 0u);  // tasks 0, 1
  EXPECT_EQ(t.add(0, 2), 2u);  // an empty set adds nothing
  EXPECT_EQ(t.add(2, 2), 2u);  // tasks 2, 3
  EXPECT_EQ(*t.next(2, true), 2u);
  EXPECT_EQ(*t.next(2, false), 3u);
  EXPECT_EQ(*t.next(2, false), 0u);  // its own done: thread 1's, in order
  EXPECT_EQ(*t.next(3, false), 1u);
  EXPECT_FALSE(t.next(1, true));
  EXPECT_EQ(t.add(1, 3), 4u);
  EXPECT_EQ(*t.next(1, false), 4u);
  EXPECT_FALSE(t.next(3, false));
}

}  // namespace
}  // namespace kiln::eval
