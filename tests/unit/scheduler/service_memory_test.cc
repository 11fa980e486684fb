// The whole scheduler service (core, database, store, registrar, worker
// link) driven without sockets or sleeps: workers on a
// protocol::MemoryTransport, time on a FakeClock. A dispatch, a lost
// worker and one that says Bye, a restart, inputs and uploads checked
// against the running step (inputs only from its closure), a cancelled
// running step.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "farm.h"
#include "kiln/scheduler/notification_outbox.h"
#include "memory_service.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;
using testing::FakeWorker;
using testing::makeDrv;

class ServiceMemoryTest : public testing::MemoryServiceTest {
 protected:
  double metric(const std::string& name) {
    auto text = prometheus::TextSerializer().Serialize(
        svc_->metricsRegistry()->Collect());
    return test::prometheusSample(text, name).value_or(-1);
  }
  double claimsRefused() { return metric("kiln_step_claims_refused_total"); }
};

TEST_F(ServiceMemoryTest, DispatchesAndRecordsABuildWithoutSockets) {
  EXPECT_EQ(svc_->endpoint(), "memory://");
  int64_t id = svc_->addBuild(jobset_, "a", a_);
  auto w = join("w1");
  ASSERT_TRUE(until({w.get()}, [&] { return w->steps.size() == 1; }));
  EXPECT_EQ("/nix/store/" + w->steps[0].drvPath.baseName(), a_);
  auto started = svc_->db().stepByDrv(a_);
  ASSERT_TRUE(started);
  EXPECT_EQ(started->startMs, clock_.nowMs());  // the injected clock
  svc_->snapshot();  // asks the service thread for one
  clock_.advance(SchedulerService::kSnapshotInterval);
  svc_->pollOnce(0ms);
  auto snap = svc_->snapshot();
  EXPECT_EQ(snap->takenMs, clock_.nowMs());
  ASSERT_EQ(snap->workers.size(), 1u);
  EXPECT_EQ(snap->workers[0].runningSteps, 1u);
  EXPECT_EQ(snap->workers[0].steps, std::vector<std::string>{a_});
  EXPECT_GT(snap->workers[0].lastSeenMs, 0);  // its Hello, at least
  EXPECT_LE(snap->workers[0].lastSeenMs, clock_.nowMs());
  EXPECT_EQ(snap->workers[0].succeededSteps, 0u);
  ASSERT_EQ(snap->queue.size(), 1u);
  EXPECT_EQ(snap->queue[0].state, "running");
  buildLast(*w, "a-out");
  ASSERT_TRUE(until({w.get()}, [&] { return build(id).finished; }));
  EXPECT_EQ(build(id).status, 0);
  EXPECT_EQ(build(id).stopMs, clock_.nowMs());
  svc_->snapshot();
  clock_.advance(SchedulerService::kSnapshotInterval);
  svc_->pollOnce(0ms);
  snap = svc_->snapshot();  // the workers page's facts after the step
  ASSERT_EQ(snap->workers.size(), 1u);
  EXPECT_TRUE(snap->workers[0].steps.empty());
  EXPECT_EQ(snap->workers[0].succeededSteps, 1u);
  EXPECT_EQ(snap->workers[0].failedSteps, 0u);
  EXPECT_EQ(svc_->coreMetrics().stepsSucceeded, 1u);
  ASSERT_EQ(sink_->events.size(), 1u);  // after the database
  EXPECT_EQ(sink_->events[0].first.kind, BuildEvent::Kind::kSucceeded);
  EXPECT_EQ(sink_->events[0].first.build, id);
  // The notifier's outbox holds the build's life, in order, with facts.
  std::vector<std::string> events;
  nlohmann::json last;
  for (auto& row : NotificationStore(svc_->db()).pending(100)) {
    events.push_back(row.event);
    if (row.event == "build.finished")
      last = nlohmann::json::parse(row.payload);
  }
  // eval.done: the evaluation's only build finished.
  EXPECT_EQ(events, (std::vector<std::string>{"build.queued", "build.started",
                                              "step.finished", "build.finished",
                                              "eval.done"}));
  EXPECT_EQ(last["build"]["id"], id);
  EXPECT_EQ(last["build"]["statusName"], "success");
  EXPECT_EQ(last["build"]["outputs"].size(), 1u);
}

TEST_F(ServiceMemoryTest, RequestsGoThroughATypedTableWithNamedStatuses) {
  int64_t id = svc_->addBuild(jobset_, "a", a_);
  ASSERT_TRUE(svc_->requests().find("build-cancel"));
  EXPECT_THROW(svc_->applyRequest("build-cancel", {{"build", "one"}}),
               SchedulerStateError);
  EXPECT_THROW(svc_->applyRequest("build-cancel", nlohmann::json::object()),
               SchedulerStateError);
  EXPECT_THROW(svc_->applyRequest("no-such-request", {}), SchedulerStateError);
  auto r = svc_->applyRequest("build-cancel", {{"build", id}});
  EXPECT_EQ(r["status"], "cancelled");
  EXPECT_EQ(r["statusCode"], 4);
  EXPECT_EQ(build(id).status, 4);
  ASSERT_EQ(sink_->events.size(), 1u);
  EXPECT_EQ(sink_->events[0].first.kind, BuildEvent::Kind::kCancelled);
}

TEST_F(ServiceMemoryTest, ASilentWorkerIsLostAndItsStepMoves) {
  int64_t id = svc_->addBuild(jobset_, "a", a_);
  auto w1 = join("w1");
  ASSERT_TRUE(until({w1.get()}, [&] { return w1->steps.size() == 1; }));
  auto w2 = join("w2");
  // w2 keeps beating, w1 stays silent: after 3 heartbeat intervals of
  // fake time w1 is lost and its step goes to w2.
  for (int i = 0; i < 4; i++) {
    clock_.advance(1s);
    w2->heartbeat();
    svc_->pollOnce(0ms);
  }
  ASSERT_TRUE(until({w1.get(), w2.get()}, [&] {
    clock_.advance(1ms);  // past the retry backoff (1 ms in tests)
    return w2->steps.size() == 1;
  }));
  EXPECT_EQ(w2->steps[0].drvPath, w1->steps[0].drvPath);
  EXPECT_EQ(svc_->coreMetrics().workersRemoved, 1u);
  buildLast(*w2, "a-out");
  ASSERT_TRUE(until({w2.get()}, [&] { return build(id).finished; }));
  EXPECT_EQ(build(id).status, 0);
}

TEST_F(ServiceMemoryTest, ARestartedServiceResumesWhereItStopped) {
  int64_t id = svc_->addBuild(jobset_, "b", b_);
  auto w1 = join("w1");
  ASSERT_TRUE(until({w1.get()}, [&] { return w1->steps.size() == 1; }));
  buildLast(*w1, "a-out");  // a is built; b is dispatched next
  ASSERT_TRUE(until({w1.get()}, [&] { return w1->steps.size() == 2; }));
  svc_.reset();  // the scheduler stops with b running
  start();
  // The restarted service does not know w1's connection: it must say
  // Hello again, and b (not a, whose output is valid) is built.
  w1->send(protocol::Heartbeat{});
  ASSERT_TRUE(until({w1.get()}, [&] { return w1->bye.has_value(); }));
  auto w2 = join("w2");
  // b was dispatched to w1, which does not claim it: it is held for three
  // heartbeat intervals (3 s), then dispatched again.
  for (int i = 0; i < 5; ++i) until({w2.get()}, [] { return true; });
  EXPECT_TRUE(w2->steps.empty());
  // Past the hold in two steps, w2 beating in between (it is silent: a
  // single step of 3 s would make it lost).
  for (auto step : {1500ms, 1600ms}) {
    clock_.advance(step);
    w2->heartbeat();
    until({w2.get()}, [] { return true; });
  }
  ASSERT_TRUE(until({w2.get()}, [&] { return w2->steps.size() == 1; }));
  EXPECT_EQ("/nix/store/" + w2->steps[0].drvPath.baseName(), b_);
  buildLast(*w2, "b-out");
  ASSERT_TRUE(until({w2.get()}, [&] { return build(id).finished; }));
  EXPECT_EQ(build(id).status, 0);
}

// A step running when the scheduler stopped is adopted by the worker that
// says Hello again listing it (no BuildStep, no attempt counted), not by
// another worker naming it.
TEST_F(ServiceMemoryTest, ARestartedServiceAdoptsTheStepItsWorkerStillRuns) {
  int64_t id = svc_->addBuild(jobset_, "a", a_);
  auto w1 = join("w1");
  ASSERT_TRUE(until({w1.get()}, [&] { return w1->steps.size() == 1; }));
  auto step = w1->steps.back();
  svc_.reset();
  start();
  auto other = std::make_unique<FakeWorker>(*net_, "peer-w2", "w2");
  other->held = {{step.stepId, step.drvPath}};
  other->hello();
  ASSERT_TRUE(until({other.get()}, [&] { return other->welcomed; }));
  EXPECT_TRUE(other->adopted.empty());  // dispatched to w1, not to w2
  EXPECT_EQ(claimsRefused(), 1.0);
  // w1 naming another .drv for that step, or a step that does not exist,
  // is refused too.
  w1->welcomed = false;
  w1->held = {{step.stepId, store::StorePath(
                                "00000000000000000000000000000000-x.drv")},
              {step.stepId + 100, step.drvPath}};
  w1->hello();
  ASSERT_TRUE(until({w1.get()}, [&] { return w1->welcomed; }));
  EXPECT_TRUE(w1->adopted.empty());
  EXPECT_EQ(claimsRefused(), 3.0);
  // Its next Hello (same description) claims the right step.
  w1->welcomed = false;
  w1->held = {{step.stepId, step.drvPath}};
  w1->hello();
  ASSERT_TRUE(until({w1.get()}, [&] { return w1->welcomed; }));
  EXPECT_EQ(w1->adopted, std::vector<uint64_t>{step.stepId});
  buildLast(*w1, "a-out");
  ASSERT_TRUE(
      until({w1.get(), other.get()}, [&] { return build(id).finished; }));
  EXPECT_EQ(build(id).status, 0);
  EXPECT_EQ(w1->steps.size(), 1u);  // no second BuildStep
  EXPECT_TRUE(other->steps.empty());
  EXPECT_EQ(svc_->db().stepByDrv(a_)->attempts, 1);
  EXPECT_EQ(metric("kiln_steps_adopted_total"), 1.0);
  // Claiming the finished step again is refused and counted.
  w1->welcomed = false;
  w1->hello();
  ASSERT_TRUE(until({w1.get()}, [&] { return w1->welcomed; }));
  EXPECT_TRUE(w1->adopted.empty());
  EXPECT_EQ(claimsRefused(), 4.0);
}

// A worker's connection repeats its Hello (it took a Bye meant for an
// earlier message) without a step dispatched after that Hello left: the
// Welcome keeps the step the worker's, so neither side drops it (a worker
// that dropped it left its slot taken in the scheduler's eyes for good).
TEST_F(ServiceMemoryTest, ARepeatedHelloKeepsAStepSentAfterIt) {
  int64_t id = svc_->addBuild(jobset_, "a", a_);
  auto w1 = join("w1");
  ASSERT_TRUE(until({w1.get()}, [&] { return w1->steps.size() == 1; }));
  auto step = w1->steps.back();
  w1->welcomed = false;
  w1->held = {};  // sent before the BuildStep reached the worker
  w1->hello();
  ASSERT_TRUE(until({w1.get()}, [&] { return w1->welcomed; }));
  EXPECT_EQ(w1->adopted, std::vector<uint64_t>{step.stepId});
  EXPECT_EQ(claimsRefused(), 0.0);
  buildLast(*w1, "a-out");
  ASSERT_TRUE(until({w1.get()}, [&] { return build(id).finished; }));
  EXPECT_EQ(build(id).status, 0);
  EXPECT_EQ(w1->steps.size(), 1u);  // built once, where it was sent
  EXPECT_EQ(svc_->db().stepByDrv(a_)->attempts, 1);
}

TEST_F(ServiceMemoryTest, AWorkerThatSaysByeGivesItsStepToAnother) {
  int64_t id = svc_->addBuild(jobset_, "a", a_);
  auto w1 = join("w1");
  ASSERT_TRUE(until({w1.get()}, [&] { return w1->steps.size() == 1; }));
  auto w2 = join("w2");
  w1->send(protocol::Bye{"going away"});
  ASSERT_TRUE(until({w1.get(), w2.get()}, [&] {
    clock_.advance(1ms);  // past the retry backoff (1 ms in tests)
    return w2->steps.size() == 1;
  }));
  EXPECT_EQ(w2->steps[0].drvPath, w1->steps[0].drvPath);
  // w1 is forgotten: what it says now asks for a Hello.
  w1->heartbeat();
  ASSERT_TRUE(until({w1.get()}, [&] { return w1->bye.has_value(); }));
  buildLast(*w2, "a-out");
  ASSERT_TRUE(until({w2.get()}, [&] { return build(id).finished; }));
  EXPECT_EQ(build(id).status, 0);
}

TEST_F(ServiceMemoryTest, InputsAndUploadsAreCheckedAgainstTheRunningStep) {
  int64_t id = svc_->addBuild(jobset_, "b", b_);
  auto w1 = join("w1");
  auto w2 = join("w2");
  ASSERT_TRUE(until({w1.get(), w2.get()},
                    [&] { return w1->steps.size() + w2->steps.size() == 1; }));
  FakeWorker& builder = w1->steps.empty() ? *w2 : *w1;
  FakeWorker& other = w1->steps.empty() ? *w1 : *w2;
  buildLast(builder, "a-out");  // a is built; b goes to the free worker
  ASSERT_TRUE(until({w1.get(), w2.get()},
                    [&] { return w1->steps.size() + w2->steps.size() == 2; }));
  FakeWorker& bWorker = builder.steps.size() == 2 ? builder : other;
  FakeWorker& idle = builder.steps.size() == 2 ? other : builder;
  auto bStep = bWorker.steps.back();
  ASSERT_EQ(bStep.roots.size(), 1u);  // a's output
  // Asking for the inputs of a step that runs elsewhere is refused...
  idle.send(protocol::NeedPaths{bStep.stepId, bStep.roots});
  ASSERT_TRUE(until({&idle}, [&] { return !idle.acks.empty(); }));
  EXPECT_FALSE(idle.acks.back().ok);
  EXPECT_EQ(idle.acks.back().id, bStep.stepId);
  // ... and so is an upload for it.
  idle.uploadOutputs(bStep, "b-out");
  ASSERT_TRUE(until({&idle}, [&] { return idle.pendingUploads == 0; }));
  ASSERT_EQ(idle.uploadErrors.size(), 1u);
  EXPECT_NE(idle.uploadErrors[0].find("not running on this worker"),
            std::string::npos)
      << idle.uploadErrors[0];
  // The worker that runs it gets its input.
  bWorker.send(protocol::NeedPaths{bStep.stepId, bStep.roots});
  std::string base(bStep.roots[0].baseName());
  ASSERT_TRUE(
      until({&bWorker}, [&] { return bWorker.received.count(base) > 0; }));
  buildLast(bWorker, "b-out");
  ASSERT_TRUE(until({&bWorker}, [&] { return build(id).finished; }));
  EXPECT_EQ(build(id).status, 0);
}

TEST_F(ServiceMemoryTest, NeedPathsOutsideTheInputClosureIsRefused) {
  int64_t id = svc_->addBuild(jobset_, "b", b_);
  auto w = join("w1");
  ASSERT_TRUE(until({w.get()}, [&] { return w->steps.size() == 1; }));
  buildLast(*w, "a-out");  // a is built; b runs next, a's output its input
  ASSERT_TRUE(until({w.get()}, [&] { return w->steps.size() == 2; }));
  auto bStep = w->steps.back();
  ASSERT_EQ(bStep.roots.size(), 1u);
  // a's .drv is valid in the central store but no input of b.
  store::StorePath unrelated(a_.substr(a_.rfind('/') + 1));
  w->send(protocol::NeedPaths{bStep.stepId, {bStep.roots[0], unrelated}});
  ASSERT_TRUE(until({w.get()}, [&] { return !w->acks.empty(); }));
  EXPECT_FALSE(w->acks.back().ok);
  EXPECT_EQ(w->acks.back().id, bStep.stepId);
  EXPECT_NE(w->acks.back().error.find(a_ + " is not in the input closure"),
            std::string::npos)
      << w->acks.back().error;
  EXPECT_EQ(w->received.count(unrelated.baseName()), 0u);
  // Its real input is still served and the step finishes.
  w->send(protocol::NeedPaths{bStep.stepId, bStep.roots});
  std::string base(bStep.roots[0].baseName());
  ASSERT_TRUE(until({w.get()}, [&] { return w->received.count(base) > 0; }));
  buildLast(*w, "b-out");
  ASSERT_TRUE(until({w.get()}, [&] { return build(id).finished; }));
  EXPECT_EQ(build(id).status, 0);
}

TEST_F(ServiceMemoryTest, CancellingABuildCancelsItsRunningStep) {
  int64_t id = svc_->addBuild(jobset_, "a", a_);
  auto w = join("w1");
  ASSERT_TRUE(until({w.get()}, [&] { return w->steps.size() == 1; }));
  auto r = svc_->applyRequest("build-cancel", {{"build", id}});
  EXPECT_EQ(r["status"], "cancelled");
  ASSERT_TRUE(until({w.get()}, [&] { return w->cancels.size() == 1; }));
  EXPECT_EQ(w->cancels[0].stepId, w->steps[0].stepId);
  // Its result comes too late: the step no longer runs.
  w->result(w->steps[0].stepId, protocol::StepStatus::kCancelled);
  ASSERT_TRUE(until({w.get()}, [&] { return !w->acks.empty(); }));
  EXPECT_FALSE(w->acks.back().ok);
  EXPECT_EQ(build(id).status, 4);
}

}  // namespace
}  // namespace kiln::scheduler
