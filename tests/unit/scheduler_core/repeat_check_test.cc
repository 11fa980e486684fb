// The reproducibility checks' policy: which steps repeat, where, verdicts.
#include "kiln/scheduler/repeat_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace kiln::scheduler {
namespace {

std::string drvPath(int i) {
  return "/nix/store/" + std::to_string(100000 + i) +
         "aaaaaaaaaaaaaaaaaaaaaaaaaa-pkg-" + std::to_string(i) + ".drv";
}

TEST(RepeatCheck, FractionConvertsToPartsPerMillion) {
  EXPECT_EQ(repeatFractionToPpm(0), 0u);
  EXPECT_EQ(repeatFractionToPpm(0.05), 50000u);
  EXPECT_EQ(repeatFractionToPpm(1), kRepeatPpmScale);
  EXPECT_DOUBLE_EQ(repeatPpmToFraction(50000), 0.05);
  EXPECT_DOUBLE_EQ(repeatPpmToFraction(5000000), 1.0);
  EXPECT_THROW(repeatFractionToPpm(-0.01), std::invalid_argument);
  EXPECT_THROW(repeatFractionToPpm(1.5), std::invalid_argument);
  EXPECT_THROW(repeatFractionToPpm(std::nan("")), std::invalid_argument);
  EXPECT_THROW(repeatFractionToPpm(std::numeric_limits<double>::infinity()),
               std::invalid_argument);
}

TEST(RepeatCheck, OffAndAllAreExact) {
  for (int i = 0; i < 200; ++i) {
    EXPECT_FALSE(selectedForRepeat(drvPath(i), 0));
    EXPECT_TRUE(selectedForRepeat(drvPath(i), kRepeatPpmScale));
  }
  EXPECT_FALSE(selectedForRepeat("", kRepeatPpmScale));
}

TEST(RepeatCheck, SelectionIsStableAndNearTheShare) {
  const int n = 20000;
  int picked = 0;
  for (int i = 0; i < n; ++i) {
    bool s = selectedForRepeat(drvPath(i), 50000);
    EXPECT_EQ(s, selectedForRepeat(drvPath(i), 50000));
    // A larger share keeps every path a smaller one picked.
    if (s) {
      EXPECT_TRUE(selectedForRepeat(drvPath(i), 100000));
    }
    picked += s;
  }
  // 5 % of 20000 is 1000; the binomial's sd is about 31.
  EXPECT_GT(picked, 850);
  EXPECT_LT(picked, 1150);
}

TEST(RepeatCheck, SelectionDependsOnlyOnThePath) {
  // A known value pins the hash so that it never changes between
  // releases (a change would repeat other steps than before).
  // FNV-1a-64("/nix/store/x.drv") mod 10^6 is 723158.
  EXPECT_FALSE(selectedForRepeat("/nix/store/x.drv", 723158));
  EXPECT_TRUE(selectedForRepeat("/nix/store/x.drv", 723159));
  int differ = 0;
  for (int i = 0; i < 100; ++i)
    differ += selectedForRepeat(drvPath(i), 500000) !=
              selectedForRepeat(drvPath(i + 1), 500000);
  EXPECT_GT(differ, 20);  // not constant over paths
}

TEST(RepeatCheck, RepeatGoesToAnotherWorkerWhenOneExists) {
  EXPECT_EQ(pickRepeatWorker("a", {"a", "b", "c"}), "b");
  EXPECT_EQ(pickRepeatWorker("b", {"a", "b"}), "a");
  EXPECT_EQ(pickRepeatWorker("a", {"a"}), "a");
  EXPECT_EQ(pickRepeatWorker("a", {}), std::nullopt);
}

TEST(RepeatCheck, SameHashesAreDeterministic) {
  auto v = compareRepeat({{"out", "sha256:1"}, {"dev", "sha256:2"}},
                         {{"dev", "sha256:2"}, {"out", "sha256:1"}});
  EXPECT_TRUE(v.deterministic);
  EXPECT_TRUE(v.differing.empty());
}

TEST(RepeatCheck, DifferingOrMissingOutputsAreNamed) {
  auto v = compareRepeat({{"out", "sha256:1"}, {"dev", "sha256:2"}},
                         {{"out", "sha256:9"}, {"doc", "sha256:3"}});
  EXPECT_FALSE(v.deterministic);
  EXPECT_EQ(v.differing, (std::vector<std::string>{"dev", "doc", "out"}));
}

}  // namespace
}  // namespace kiln::scheduler
