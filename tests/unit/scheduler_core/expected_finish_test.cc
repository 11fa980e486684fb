// The expected finish of an evaluation: critical path against work over
// slots, running steps' remainders, unknown packages, bad input, and the
// error of an estimate.
#include "kiln/scheduler/expected_finish.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

namespace kiln::scheduler {
namespace {

const std::unordered_map<std::string, double> kHistory = {
    {"gcc", 600}, {"glibc", 300}, {"hello", 10}, {"curl", 60}};

TEST(ExpectedFinish, NothingLeftIsNow) {
  auto e = estimateFinish({}, kHistory, 4, 30);
  EXPECT_EQ(e.seconds, 0);
  EXPECT_EQ(e.criticalPathSec, 0);
}

TEST(ExpectedFinish, ChainIsTheCriticalPath) {
  // glibc → gcc → hello, and curl beside them.
  std::vector<RemainingStep> s = {
      {"glibc", {}}, {"gcc", {0}}, {"hello", {1}}, {"curl", {0}}};
  auto e = estimateFinish(s, kHistory, 8, 30);
  EXPECT_DOUBLE_EQ(e.criticalPathSec, 910);
  EXPECT_DOUBLE_EQ(e.totalWorkSec, 970);
  EXPECT_DOUBLE_EQ(e.seconds, 910);
}

TEST(ExpectedFinish, FewSlotsMakeWorkTheBound) {
  std::vector<RemainingStep> s;
  for (int i = 0; i < 40; ++i) s.push_back({"curl", {}});
  auto e = estimateFinish(s, kHistory, 2, 30);
  EXPECT_DOUBLE_EQ(e.criticalPathSec, 60);
  EXPECT_DOUBLE_EQ(e.seconds, 40 * 60 / 2.0);
}

TEST(ExpectedFinish, RunningStepsCountWhatIsLeft) {
  std::vector<RemainingStep> s = {{"gcc", {}, true, 500},
                                  {"hello", {0}},
                                  {"glibc", {}, true, 400}};  // overdue
  auto e = estimateFinish(s, kHistory, 4, 30);
  EXPECT_DOUBLE_EQ(e.criticalPathSec, 110);
  EXPECT_DOUBLE_EQ(e.totalWorkSec, 110);
}

TEST(ExpectedFinish, UnknownPackagesTakeTheDefault) {
  std::vector<RemainingStep> s = {{"new", {}}, {"newer", {0}}};
  EXPECT_DOUBLE_EQ(estimateFinish(s, kHistory, 1, 45).seconds, 90);
}

TEST(ExpectedFinish, DiamondCountsTheLongerBranchOnce) {
  // 0 → {1 (gcc), 2 (hello)} → 3
  std::vector<RemainingStep> s = {
      {"curl", {}}, {"gcc", {0}}, {"hello", {0}}, {"curl", {1, 2}}};
  EXPECT_DOUBLE_EQ(estimateFinish(s, kHistory, 16, 30).criticalPathSec, 720);
}

TEST(ExpectedFinish, BadInputThrows) {
  EXPECT_THROW(estimateFinish({{"a", {1}}}, kHistory, 1, 1),
               std::invalid_argument);
  EXPECT_THROW(estimateFinish({{"a", {0}}}, kHistory, 1, 1),
               std::invalid_argument);
  EXPECT_THROW(estimateFinish({{"a", {1}}, {"b", {0}}}, kHistory, 1, 1),
               std::invalid_argument);
  EXPECT_THROW(estimateFinish({{"a", {}}}, kHistory, 0, 1),
               std::invalid_argument);
  EXPECT_THROW(estimateFinish({{"a", {}}}, kHistory, 1, std::nan("")),
               std::invalid_argument);
  EXPECT_THROW(estimateFinish({{"a", {}, true, -1}}, kHistory, 1, 1),
               std::invalid_argument);
}

TEST(ExpectedFinish, ErrorIsSignedAndRelativeToTheLookAhead) {
  auto late = estimateError(1000, 11000, 13000);
  EXPECT_EQ(late.errorMs, 2000);
  EXPECT_DOUBLE_EQ(late.percent, 20);
  auto early = estimateError(1000, 11000, 6000);
  EXPECT_EQ(early.errorMs, -5000);
  EXPECT_DOUBLE_EQ(early.percent, 50);
  EXPECT_DOUBLE_EQ(estimateError(5, 5, 5).percent, 0);
  EXPECT_DOUBLE_EQ(estimateError(5, 5, 6).percent, 100);
}

}  // namespace
}  // namespace kiln::scheduler
