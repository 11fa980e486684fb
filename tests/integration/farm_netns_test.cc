// More than one machine (issue 14): the scheduler in one network namespace
// and three workers in three others, each joined to the scheduler's bridge
// by a veth pair with an address of its own, talking CURVE over those
// links. A small collection builds across all three; a worker whose link
// is set down is declared lost and its step moves to another; a worker
// with a key the scheduler does not know is refused. Needs root (network
// namespaces); skips saying why otherwise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "farm.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "netns_lab.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

test::FarmStep stepNamed(const test::Farm& farm, const std::string& suffix) {
  for (auto& s : farm.steps())
    if (s.drvPath.ends_with(suffix)) return s;
  throw Error("no step ending in " + suffix);
}

// `slow` touches `<dir>/started` and waits for `<dir>/release`; `after`
// depends on it.
std::string gatedCollection(const test::Farm& farm) {
  return farm.writeCollection("gated", R"(let
  slow = mk "slow" ''
    touch )" + farm.dir() + R"(/started
    while [ ! -e )" + farm.dir() + R"(/release ]; do sleep 0.05; done
    echo slow-output > $out'' [];
in { inherit slow; after = mk "after" "cat $deps > $out" [ slow ]; })");
}

class FarmNetns : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!test::Farm::canRun(&why) || !test::NetnsLab::canRun(&why))
      GTEST_SKIP() << why;
    lab_ = std::make_unique<test::NetnsLab>(3);
    test::FarmOptions o;
    o.curve = true;
    o.heartbeat = 500ms;
    o.schedulerArgs = {"--retry-backoff-ms", "100"};
    o.netns = lab_->schedulerNetns();
    o.host = lab_->schedulerAddress();
    farm_ = std::make_unique<test::Farm>(o);
    // Every worker is added before the scheduler starts: its allow-list
    // is written then. The stranger shares worker 2's namespace.
    for (size_t i = 0; i < 3; i++) {
      auto w = test::WorkerOptions::withSlots(1);
      w.netns = lab_->workerNetns(i);
      farm_->addWorker(w);
    }
    auto stranger = test::WorkerOptions::withSlots(1);
    stranger.keyAllowed = false;
    stranger.netns = lab_->workerNetns(2);
    farm_->addWorker(stranger);
    farm_->startScheduler();
    ASSERT_TRUE(farm_->waitForWorkers(3, 60s)) << farm_->scheduler().log();
  }
  // The farm's processes end before the namespaces are deleted.
  void TearDown() override { farm_.reset(); }

  test::Farm& farm() { return *farm_; }
  std::unique_ptr<test::NetnsLab> lab_;
  std::unique_ptr<test::Farm> farm_;
};

TEST_F(FarmNetns, AStrangerIsRefusedAndTheOthersBuildAcrossTheirLinks) {
  auto code = farm().worker(3).waitExit(60s);
  ASSERT_TRUE(code.has_value()) << farm().worker(3).log();
  EXPECT_EQ(*code, 1);
  EXPECT_THAT(farm().worker(3).log(),
              HasSubstr("refused this worker's key (ZAP status 400)"));
  EXPECT_THAT(farm().scheduler().log(), HasSubstr("is not in the allow-list"));
  EXPECT_EQ(farm().metric("kiln_workers"), 3.0);

  // Six independent 0.3 s steps and one joining them, one slot per worker:
  // every worker gets some.
  farm().createJobset(
      "p", "parts",
      farm().writeCollection("parts", test::partsCollection(6, true)));
  int64_t eval = farm().evaluate("p", "parts");
  ASSERT_TRUE(farm().waitForBuilds(eval, 300s)) << farm().scheduler().log();
  for (auto& b : farm().builds(eval)) EXPECT_EQ(b.status, 0) << b.job;
  std::set<std::string> workers;
  for (auto& s : farm().steps())  // "worker-0 (its key's name)"
    workers.insert(s.worker.substr(0, s.worker.find(' ')));
  EXPECT_EQ(workers,
            (std::set<std::string>{"worker-0", "worker-1", "worker-2"}));
}

TEST_F(FarmNetns, AWorkerWhoseLinkIsCutIsLostAndItsStepMoves) {
  farm().createJobset("p", "gated", gatedCollection(farm()));
  int64_t eval = farm().evaluate("p", "gated");
  ASSERT_TRUE(test::pollUntil(
      [&] { return pathExists(farm().dir() + "/started"); }, 60s))
      << farm().scheduler().log();
  deletePath(farm().dir() + "/started");
  std::string first = stepNamed(farm(), "-slow.drv").worker;
  ASSERT_TRUE(first.starts_with("worker-")) << first;
  size_t cut = std::stoul(first.substr(7));
  ASSERT_LT(cut, 3u);
  lab_->setWorkerLink(cut, false);
  ASSERT_TRUE(farm().waitForWorkers(2, 60s)) << farm().scheduler().log();
  EXPECT_THAT(farm().scheduler().log(), HasSubstr(first + " lost"));
  // Another worker starts the step again; then it may finish.
  ASSERT_TRUE(test::pollUntil(
      [&] { return pathExists(farm().dir() + "/started"); }, 60s))
      << farm().scheduler().log();
  writeFile(farm().dir() + "/release", "");
  ASSERT_TRUE(farm().waitForBuilds(eval, 120s)) << farm().scheduler().log();
  for (auto& b : farm().builds(eval)) EXPECT_EQ(b.status, 0) << b.job;
  auto slow = stepNamed(farm(), "-slow.drv");
  EXPECT_EQ(slow.attempts, 2);
  EXPECT_NE(slow.worker, first);
  EXPECT_NE(stepNamed(farm(), "-after.drv").worker, first);
}

}  // namespace
}  // namespace kiln
