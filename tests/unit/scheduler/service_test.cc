// The scheduler service over loopback with a scripted worker: hello,
// dispatch, input transfer, verified uploads, results, failures, cancel,
// lost workers, restart recovery, operations.
#include "kiln/scheduler/service.h"

#include <gtest/gtest.h>

#include <thread>

#include "fake_worker.h"
#include "service_fixture.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;
using testing::FakeWorker;
using testing::makeDrv;

class ServiceTest : public ::testing::Test {
 protected:
  TempDir dir_{"kiln-svc"};
  std::string state_ = dir_.path() + "/state";
  std::unique_ptr<SchedulerService> svc_;
  std::string a_, b_, c_;
  int64_t jobset_ = 0;

  void SetUp() override {
    {
      store::LocalStore store(state_);
      a_ = makeDrv(store, "a");
      b_ = makeDrv(store, "b", {a_});
      c_ = makeDrv(store, "c", {b_});
    }
    start();
    svc_->applyRequest("project-create", {{"name", "p"}});
    auto js = svc_->applyRequest(
        "jobset-create",
        {{"project", "p"}, {"name", "j"}, {"location", "/nowhere"},
         {"checkInterval", 0}});
    jobset_ = js["id"].get<int64_t>();
  }
  void start() { svc_ = std::make_unique<SchedulerService>(testing::testConfig(state_)); }

  // Runs the service and the workers until `pred` holds (10 s deadline).
  bool until(std::vector<FakeWorker*> ws, const std::function<bool()>& pred) {
    return testing::pumpUntil(*svc_, ws, pred);
  }

  // Builds the step most recently received by `w` with success.
  void buildLast(FakeWorker& w, const std::string& contents) {
    testing::buildLast(w, contents, [&](const std::function<bool()>& pred) {
      return until({&w}, pred);
    });
  }

  BuildRow build(int64_t id) { return *svc_->db().build(id); }
};

TEST_F(ServiceTest, BuildsAChainThroughAWorker) {
  int64_t id = svc_->addBuild(jobset_, "c", c_);
  FakeWorker w(svc_->endpoint());
  w.hello();
  ASSERT_TRUE(until({&w}, [&] { return w.steps.size() == 1; }));
  EXPECT_EQ("/nix/store/" + w.steps[0].drvPath.baseName(), a_);
  EXPECT_TRUE(w.steps[0].inputs.empty());
  w.send(protocol::LogChunk{w.steps[0].stepId, "building a\n"});
  buildLast(w, "a-out");
  ASSERT_TRUE(until({&w}, [&] { return w.steps.size() == 2; }));
  // b's input closure is a's output, which this worker built: BuildStep
  // names it as a root and sends no metadata for it.
  auto& sb = w.steps[1];
  ASSERT_EQ(sb.roots.size(), 1u);
  EXPECT_TRUE(sb.inputs.empty());
  // A worker that lacks it anyway (its store was wiped) may fetch it.
  w.send(protocol::NeedPaths{sb.stepId, {sb.roots[0]}});
  ASSERT_TRUE(until({&w}, [&] { return w.received.size() == 1; }));
  EXPECT_EQ(w.received.begin()->second, testing::outputNar("a-out"));
  buildLast(w, "b-out");
  ASSERT_TRUE(until({&w}, [&] { return w.steps.size() == 3; }));
  buildLast(w, "c-out");
  ASSERT_TRUE(until({&w}, [&] { return build(id).finished; }));
  EXPECT_EQ(build(id).status, 0);
  auto outs = svc_->db().buildOutputs(id);
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].first, "out");
  EXPECT_TRUE(pathExists(state_ + "/logs/" + baseNameOf(a_) + ".1.log"));
  EXPECT_EQ(readFile(state_ + "/logs/" + baseNameOf(a_) + ".1.log"),
            "building a\n");
  EXPECT_GE(svc_->coreMetrics().stepsSucceeded, 3u);
}

// Another worker did not build a's output: b's BuildStep carries its
// metadata, so the worker can fetch and register it.
TEST_F(ServiceTest, InputMetadataGoesToAWorkerThatLacksThePath) {
  svc_->addBuild(jobset_, "b", b_);
  FakeWorker w1(svc_->endpoint(), "w1");
  w1.hello();
  ASSERT_TRUE(until({&w1}, [&] { return w1.steps.size() == 1; }));
  buildLast(w1, "a-out");
  ASSERT_TRUE(until({&w1}, [&] { return w1.steps.size() == 2; }));
  EXPECT_TRUE(w1.steps[1].inputs.empty());
  w1.send(protocol::Bye{"leaving"});  // b moves to w2
  FakeWorker w2(svc_->endpoint(), "w2");
  w2.hello();
  ASSERT_TRUE(until({&w1, &w2}, [&] { return w2.steps.size() == 1; }));
  const auto& sb = w2.steps[0];
  ASSERT_EQ(sb.roots.size(), 1u);
  ASSERT_EQ(sb.inputs.size(), 1u);
  EXPECT_EQ(sb.inputs[0].path, sb.roots[0]);
  EXPECT_EQ(sb.inputs[0].narHash,
            hashString(HashAlgo::kSha256, testing::outputNar("a-out")));
}

// A worker may say Hello twice on one connection (a Bye meant for an older
// message crossed its Hello): it keeps its step, nothing is retried.
TEST_F(ServiceTest, ASecondHelloOnTheSameConnectionKeepsItsSteps) {
  int64_t id = svc_->addBuild(jobset_, "a", a_);
  FakeWorker w(svc_->endpoint());
  w.hello();
  ASSERT_TRUE(until({&w}, [&] { return w.steps.size() == 1; }));
  w.hello();
  buildLast(w, "a-out");
  ASSERT_TRUE(until({&w}, [&] { return build(id).finished; }));
  EXPECT_EQ(build(id).status, 0);
  EXPECT_EQ(w.steps.size(), 1u);
  EXPECT_EQ(svc_->db().stepByDrv(a_)->attempts, 1);
}

TEST_F(ServiceTest, RefusesAWorkerWithAnotherStoreDirectory) {
  FakeWorker w(svc_->endpoint(), "w1", "/gnu/store");
  w.hello();
  ASSERT_TRUE(until({&w}, [&] { return w.refused.has_value(); }));
  EXPECT_NE(w.refused->reason.find("store directory mismatch"),
            std::string::npos);
  EXPECT_FALSE(w.welcomed);
}

TEST_F(ServiceTest, ACorruptUploadIsNotRegisteredAndARetrySucceeds) {
  int64_t id = svc_->addBuild(jobset_, "a", a_);
  FakeWorker w(svc_->endpoint());
  w.hello();
  ASSERT_TRUE(until({&w}, [&] { return w.steps.size() == 1; }));
  w.uploadOutputs(w.steps[0], "evil!", "good!");
  ASSERT_TRUE(until({&w}, [&] { return w.pendingUploads == 0; }));
  ASSERT_EQ(w.uploadErrors.size(), 1u);
  EXPECT_NE(w.uploadErrors[0].find("hash mismatch"), std::string::npos)
      << w.uploadErrors[0];
  {
    store::LocalStore store(state_);
    EXPECT_FALSE(store.isValid(testing::outPath(store, a_)));
  }
  w.uploadErrors.clear();
  buildLast(w, "good!");
  ASSERT_TRUE(until({&w}, [&] { return build(id).finished; }));
  EXPECT_EQ(build(id).status, 0);
}

TEST_F(ServiceTest, SuccessWithoutUploadsIsRetried) {
  int64_t id = svc_->addBuild(jobset_, "a", a_);
  FakeWorker w(svc_->endpoint());
  w.hello();
  ASSERT_TRUE(until({&w}, [&] { return w.steps.size() == 1; }));
  w.result(w.steps[0].stepId, protocol::StepStatus::kSuccess);
  ASSERT_TRUE(until({&w}, [&] { return w.steps.size() == 2; }));
  EXPECT_EQ(w.steps[1].drvPath, w.steps[0].drvPath);
  buildLast(w, "ok");
  ASSERT_TRUE(until({&w}, [&] { return build(id).finished; }));
  EXPECT_EQ(build(id).status, 0);
  EXPECT_EQ(svc_->coreMetrics().retries, 1u);
}

TEST_F(ServiceTest, FailureFailsDependentsCachesAndRestartRecovers) {
  int64_t id = svc_->addBuild(jobset_, "c", c_);
  FakeWorker w(svc_->endpoint());
  w.hello();
  ASSERT_TRUE(until({&w}, [&] { return w.steps.size() == 1; }));
  w.result(w.steps[0].stepId, protocol::StepStatus::kFailed, "boom");
  ASSERT_TRUE(until({&w}, [&] { return build(id).finished; }));
  EXPECT_EQ(build(id).status, 2);
  EXPECT_TRUE(svc_->db().cachedFailure(a_, INT64_MAX - 1));
  // A new build over the same closure fails fast (a cached, c dependent).
  int64_t id2 = svc_->addBuild(jobset_, "c2", c_);
  EXPECT_TRUE(build(id2).finished);
  EXPECT_EQ(build(id2).status, 2);
  // Restart: the cached failure is cleared and a is queued again.
  auto r = svc_->applyRequest("build-restart", {{"build", id}});
  EXPECT_EQ(r["restartedSteps"].size(), 1u);
  EXPECT_FALSE(svc_->db().cachedFailure(a_, 0));
  EXPECT_FALSE(build(id).finished);
  ASSERT_TRUE(until({&w}, [&] { return w.steps.size() == 2; }));
  EXPECT_EQ("/nix/store/" + w.steps[1].drvPath.baseName(), a_);
}

TEST_F(ServiceTest, CancelStopsTheRunningStep) {
  int64_t id = svc_->addBuild(jobset_, "a", a_);
  FakeWorker w(svc_->endpoint());
  w.hello();
  ASSERT_TRUE(until({&w}, [&] { return w.steps.size() == 1; }));
  svc_->applyRequest("build-cancel", {{"build", id}});
  EXPECT_TRUE(build(id).finished);
  EXPECT_EQ(build(id).status, 4);
  ASSERT_TRUE(until({&w}, [&] { return w.cancels.size() == 1; }));
  EXPECT_EQ(w.cancels[0].stepId, w.steps[0].stepId);
  EXPECT_THROW(svc_->applyRequest("build-cancel", {{"build", id}}), Error);
}

TEST_F(ServiceTest, ASilentWorkerIsLostAndItsStepMoves) {
  svc_->addBuild(jobset_, "a", a_);
  FakeWorker w1(svc_->endpoint(), "w1");
  w1.hello();
  ASSERT_TRUE(until({&w1}, [&] { return w1.steps.size() == 1; }));
  w1.silent = true;
  FakeWorker w2(svc_->endpoint(), "w2");
  w2.hello();
  // Heartbeats every 200 ms: lost after 600 ms of silence.
  ASSERT_TRUE(until({&w1, &w2}, [&] { return w2.steps.size() == 1; }));
  EXPECT_EQ(w2.steps[0].drvPath, w1.steps[0].drvPath);
  EXPECT_EQ(svc_->coreMetrics().workersRemoved, 1u);
  // The lost worker's late messages are answered with Bye.
  w1.silent = false;
  w1.result(w1.steps[0].stepId, protocol::StepStatus::kSuccess);
  ASSERT_TRUE(until({&w1, &w2}, [&] { return w1.bye.has_value(); }));
}

TEST_F(ServiceTest, RestartRebuildsTheDagWithoutRebuildingFinishedSteps) {
  int64_t id = svc_->addBuild(jobset_, "c", c_);
  {
    FakeWorker w(svc_->endpoint());
    w.hello();
    ASSERT_TRUE(until({&w}, [&] { return w.steps.size() == 1; }));
    buildLast(w, "a-out");
    ASSERT_TRUE(until({&w}, [&] { return w.steps.size() == 2; }));
  }
  svc_.reset();  // the scheduler goes away with b running
  start();
  EXPECT_FALSE(build(id).finished);
  auto q = svc_->queue();
  ASSERT_EQ(q.size(), 2u);  // b and c; a is finished
  FakeWorker w(svc_->endpoint(), "w9");
  w.hello();
  ASSERT_TRUE(until({&w}, [&] { return w.steps.size() == 1; }));
  EXPECT_EQ("/nix/store/" + w.steps[0].drvPath.baseName(), b_);
  buildLast(w, "b-out");
  ASSERT_TRUE(until({&w}, [&] { return w.steps.size() == 2; }));
  buildLast(w, "c-out");
  ASSERT_TRUE(until({&w}, [&] { return build(id).finished; }));
  EXPECT_EQ(build(id).status, 0);
  EXPECT_EQ(svc_->db().stepByDrv(a_)->attempts, 1);
}

TEST_F(ServiceTest, QueueExplainsAndBumpReordersRequestsThroughTheTable) {
  int64_t id = svc_->addBuild(jobset_, "c", c_);
  auto q = svc_->queue();
  ASSERT_EQ(q.size(), 3u);
  for (auto& e : q) EXPECT_FALSE(e.reason.empty());
  EXPECT_NE(q[0].reason.find("x86_64-linux"), std::string::npos) << q[0].reason;
  // A second process's request goes through the requests table.
  std::atomic<bool> stop{false};
  std::thread loop([&] { svc_->run(stop); });
  nlohmann::json r;
  EXPECT_NO_THROW(r = submitRequest(state_, "build-bump",
                                    {{"build", id}, {"priority", 10}}));
  nlohmann::json queue = submitRequest(state_, "queue", {});
  EXPECT_THROW(submitRequest(state_, "build-bump", {{"build", 12345}}),
               Error);
  stop = true;
  loop.join();
  EXPECT_EQ(r["globalPriority"], 10);
  EXPECT_EQ(build(id).globalPriority, 10);
  EXPECT_EQ(queue.size(), 3u);
}

TEST(ServiceOffline, RequestsApplyDirectlyWithoutAScheduler) {
  TempDir dir("kiln-offline");
  auto r = submitRequest(dir.path(), "project-create", {{"name", "x"}});
  EXPECT_EQ(r["id"], 1);
  EXPECT_THROW(submitRequest(dir.path(), "project-create", {{"name", "x"}}),
               Error);
  EXPECT_THROW(submitRequest(dir.path(), "jobset-eval",
                             {{"project", "x"}, {"jobset", "y"}}),
               Error);
  EXPECT_THROW(submitRequest(dir.path(), "frobnicate", {}), Error);
}

TEST(ServiceLock, OnlyOneSchedulerPerStateDirectory) {
  TempDir dir("kiln-lock");
  SchedulerService s(testing::testConfig(dir.path()));
  EXPECT_THROW(SchedulerService(testing::testConfig(dir.path())), Error);
}

}  // namespace
}  // namespace kiln::scheduler
