// The worker pool of parallel job evaluation: every item's output arrives
// whole and once, whatever the number of workers; a worker killed while
// evaluating an item reports that item alone; workers over their memory
// limit are replaced without losing items.
#include "kiln/evaluator/job_workers.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <vector>

#include "fake_spawner.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"

namespace kiln::eval {
namespace {

// Prints "item I line K" lines for each item; kills itself on `crashAt`.
class FakeHooks final : public JobWorkerHooks {
 public:
  explicit FakeHooks(size_t crashAt = SIZE_MAX, size_t allocate = 0)
      : crashAt_(crashAt), allocate_(allocate) {}
  void startWorker() override {}
  JobCounts evaluate(size_t index) override {
    if (index == crashAt_) ::raise(SIGKILL);
    if (allocate_)
      kept_.emplace_back(allocate_, 'x');  // never freed by this worker
    for (int k = 0; k < 3; ++k)
      std::cout << "item " << index << " line " << k << "\n";
    return {3, index % 5 == 0 ? 1u : 0u};
  }
  void print(const std::string& marker) override { std::cout << marker; }
  void stopWorker() override { std::cout.flush(); }
  std::string lostItem(size_t index, const std::string& why) override {
    return "lost " + std::to_string(index) + ": " + why + "\n";
  }

 private:
  size_t crashAt_;
  size_t allocate_;
  std::vector<std::string> kept_;
};

struct PoolRun {
  JobCounts counts;
  std::vector<std::string> lines;
};

PoolRun runPool(size_t items, JobWorkerOptions options, JobWorkerHooks& hooks) {
  TempDir dir("kiln-job-workers");
  std::string path = dir.path() + "/out";
  FILE* f = std::fopen(path.c_str(), "w+");
  PoolRun r;
  r.counts = runJobWorkers(items, options, hooks, ::fileno(f));
  std::fclose(f);
  std::string text = readFile(path);
  for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos;
       at = nl + 1)
    r.lines.push_back(text.substr(at, nl - at));
  return r;
}

std::vector<std::string> expectedLines(size_t items, size_t skip = SIZE_MAX) {
  std::vector<std::string> out;
  for (size_t i = 0; i < items; ++i)
    for (int k = 0; k < 3; ++k)
      if (i != skip)
        out.push_back("item " + std::to_string(i) + " line " +
                      std::to_string(k));
  return out;
}

TEST(JobWorkers, EveryItemOnceForAnyNumberOfWorkers) {
  for (unsigned workers : {1u, 2u, 3u}) {
    FakeHooks hooks;
    PoolRun r = runPool(1000, {workers, 0}, hooks);
    std::sort(r.lines.begin(), r.lines.end());
    auto want = expectedLines(1000);
    std::sort(want.begin(), want.end());
    EXPECT_EQ(r.lines, want) << workers << " workers";
    EXPECT_EQ(r.counts.jobs, 3000u);
    EXPECT_EQ(r.counts.failed, 200u);
  }
}

TEST(JobWorkers, ItemsOfOneWorkerStayInOrderAndWhole) {
  FakeHooks hooks;
  PoolRun r = runPool(200, {1, 0}, hooks);
  EXPECT_EQ(r.lines, expectedLines(200));
}

TEST(JobWorkers, AKilledWorkerLosesOnlyTheItemItWasEvaluating) {
  FakeHooks hooks(/*crashAt=*/137);
  PoolRun r = runPool(500, {2, 0}, hooks);
  std::vector<std::string> lost;
  std::vector<std::string> rest;
  for (auto& l : r.lines) (l.starts_with("lost ") ? lost : rest).push_back(l);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].rfind(
                "lost 137: the evaluation worker was killed by signal 9", 0),
            0u)
      << lost[0];
  std::sort(rest.begin(), rest.end());
  auto want = expectedLines(500, 137);
  std::sort(want.begin(), want.end());
  EXPECT_EQ(rest, want);
  EXPECT_EQ(r.counts.jobs, 499u * 3 + 1);
}

TEST(JobWorkers, WorkersOverTheMemoryLimitAreReplaced) {
  FakeHooks hooks(SIZE_MAX, /*allocate=*/1 << 20);  // 1 MiB kept per item
  size_t limit = 32u << 20;
  PoolRun r =
      runPool(200, {2, limit}, hooks);  // 200 MiB in all without replacement
  std::sort(r.lines.begin(), r.lines.end());
  auto want = expectedLines(200);
  std::sort(want.begin(), want.end());
  EXPECT_EQ(r.lines, want);
}

TEST(JobWorkers, WorkersAreForkedThroughTheGivenSpawner) {
  FakeHooks hooks;
  testing::FakeSpawner spawner;
  PoolRun r = runPool(50, {3, 0, &spawner}, hooks);
  EXPECT_EQ(r.lines.size(), 150u);
  auto calls = spawner.calls();
  ASSERT_EQ(calls.size(), 3u);
  for (auto& c : calls) EXPECT_EQ(c.cloneFlags, 0);  // plain forks
}

// A worker that cannot be forked (a full process table) ends the run with
// an error, after the workers already started are stopped.
TEST(JobWorkers, AFailedForkIsAnError) {
  FakeHooks hooks;
  testing::FakeSpawner spawner;
  spawner.failNext({0, EAGAIN});
  AutoCloseFD devNull(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  try {
    runJobWorkers(50, {2, 0, &spawner}, hooks, devNull.get());
    FAIL() << "no error";
  } catch (const SysError& e) {
    EXPECT_EQ(e.errNo(), EAGAIN);
    EXPECT_NE(std::string(e.what()).find("forking an evaluation worker"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(spawner.calls().size(), 2u);
}

}  // namespace
}  // namespace kiln::eval
