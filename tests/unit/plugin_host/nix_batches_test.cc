// The nix evaluator plugin's batching (plugins/eval_nix/batches.h): one
// nix-instantiate for many attributes, broken ones found by halving.
#include <gtest/gtest.h>

#include "batches.h"

namespace kiln::nix_eval {
namespace {

// Batches: one call for many attributes; a broken attribute is found by
// halving, and every other attribute still gets its path.
TEST(InstantiateInBatches, SplitsFailedBatchesDownToTheBrokenJobs) {
  std::vector<std::string> attrs;
  for (int i = 0; i < 10; i++) attrs.push_back("a" + std::to_string(i));
  std::vector<size_t> calls;
  auto batch = [&](const std::vector<std::string>& part) {
    calls.push_back(part.size());
    BatchOutcome o;
    o.ok = true;
    for (auto& a : part) {
      if (a == "a3" || a == "a7") {
        o.ok = false;
        o.error = "error: " + a + " is broken";
        o.drvPaths.clear();
        return o;
      }
      o.drvPaths.push_back("/nix/store/x-" + a + ".drv");
    }
    return o;
  };
  auto jobs = instantiateInBatches(attrs, batch, 4);
  ASSERT_EQ(jobs.size(), 10u);
  for (size_t i = 0; i < jobs.size(); i++) {
    EXPECT_EQ(jobs[i].attr, attrs[i]);
    if (i == 3 || i == 7) {
      EXPECT_EQ(jobs[i].drvPath, "");
      EXPECT_EQ(jobs[i].error, "error: " + attrs[i] + " is broken");
    } else {
      EXPECT_EQ(jobs[i].drvPath, "/nix/store/x-" + attrs[i] + ".drv");
      EXPECT_EQ(jobs[i].error, "");
    }
  }
  // Batches of at most 4 (4 + 4 + 2), the two failed ones halved twice.
  EXPECT_EQ(calls, (std::vector<size_t>{4, 2, 2, 1, 1, 4, 2, 2, 1, 1, 2}));
}

TEST(InstantiateInBatches, AWrongNumberOfPathsCountsAsFailure) {
  int n = 0;
  auto jobs = instantiateInBatches(
      {"x", "y"}, [&](const std::vector<std::string>& part) {
        n++;
        BatchOutcome o;
        o.ok = true;
        if (part.size() == 1) o.drvPaths.push_back("/nix/store/p-" + part[0]);
        return o;  // the pair prints nothing: split
      });
  EXPECT_EQ(n, 3);
  EXPECT_EQ(jobs[0].drvPath, "/nix/store/p-x");
  EXPECT_EQ(jobs[1].drvPath, "/nix/store/p-y");
  EXPECT_TRUE(
      instantiateInBatches({}, [](auto&) { return BatchOutcome{}; }).empty());
}

}  // namespace
}  // namespace kiln::nix_eval
