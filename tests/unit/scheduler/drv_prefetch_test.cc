// Derivations parsed off the service thread, and jobs ordered dependencies
// first, so that ingestion reads no file and adds few steps per build.
#include "kiln/scheduler/drv_prefetch.h"

#include <gtest/gtest.h>

#include "service_fixture.h"

namespace kiln::scheduler {
namespace {

using testing::makeDrv;

std::vector<std::string> attrs(const std::vector<Job>& jobs) {
  std::vector<std::string> out;
  for (auto& j : jobs) out.push_back(j.attr);
  return out;
}

Job job(const std::string& attr, const std::string& drvPath) {
  Job j;
  j.attr = attr;
  j.drvPath = drvPath;
  return j;
}

TEST(DrvPrefetch, ReadsTheClosureOfTheJobsAndSkipsWhatIsNotValid) {
  TempDir dir("kiln-prefetch");
  store::LocalStore store(dir.path() + "/state");
  auto a = makeDrv(store, "a");
  auto b = makeDrv(store, "b", {a});
  auto c = makeDrv(store, "c", {b});
  std::string missing =
      "/nix/store/00000000000000000000000000000000-gone.drv";
  auto drvs = prefetchDrvs(store, {c, missing, ""});
  EXPECT_EQ(drvs->size(), 3u);
  ASSERT_TRUE(drvs->count(a));
  EXPECT_EQ(drvs->at(b)->name, "b");
  EXPECT_EQ(drvs->at(c)->inputDrvs.size(), 1u);
  EXPECT_FALSE(drvs->count(missing));
}

TEST(DrvPrefetch, JobsComeAfterTheJobsTheyDependOn) {
  TempDir dir("kiln-prefetch");
  store::LocalStore store(dir.path() + "/state");
  auto a = makeDrv(store, "a");
  auto b = makeDrv(store, "b", {a});
  auto c = makeDrv(store, "c", {b});
  auto x = makeDrv(store, "x");
  auto d = makeDrv(store, "d", {a, c});
  std::vector<Job> jobs = {job("d", d), job("c", c), job("b", b),
                           job("x", x), job("a", a)};
  Job failed;
  failed.attr = "broken";
  failed.error = "error: undefined variable 'foo'";
  jobs.insert(jobs.begin() + 2, failed);
  orderJobsByDepth(jobs, *prefetchDrvs(store, {d, x}), store.storeDir());
  // Depths: a 0, x 0, b 1, c 2, d 3; a failed job counts as 0; ties keep
  // their order.
  EXPECT_EQ(attrs(jobs),
            (std::vector<std::string>{"broken", "x", "a", "b", "c", "d"}));
}

}  // namespace
}  // namespace kiln::scheduler
