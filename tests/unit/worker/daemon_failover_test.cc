// The worker daemon given several schedulers (docs/worker.md, "Fail-over"):
// it skips one that does not answer, and after losing the one it follows it
// says Hello to the next with the steps it holds, which that scheduler
// adopts: the step is not built again. It is kept until a scheduler
// acknowledges its result (once recorded), then forgotten.
#include <gtest/gtest.h>

#include "daemon_fixture.h"

namespace kiln::worker {
namespace {

namespace proto = protocol;
using namespace std::chrono_literals;
using fixture::DaemonTest;
using fixture::FakeScheduler;

TEST_F(DaemonTest, ASchedulerThatDoesNotAnswerIsSkipped) {
  // The first endpoint never completes a handshake (a standby scheduler).
  net_.scheduler("fake://standby")->setConnected(false);
  schedulers_ = {"fake://standby", sched_.endpoint};
  failoverAfter_ = 300ms;
  startDaemon();
  for (int i = 0; i < 3; ++i) daemon_->turn();
  clock_.advance(299ms);
  for (int i = 0; i < 3; ++i) daemon_->turn();
  EXPECT_EQ(sched_.link->connects(), 0);  // still waiting for the first
  clock_.advance(1ms);
  ASSERT_TRUE(pollUntilWelcomed()) << error_;
  ASSERT_NE(sched_.last<proto::Hello>(), nullptr);
  EXPECT_EQ(sched_.last<proto::Hello>()->workerId, "w1");
  EXPECT_EQ(net_.scheduler("fake://standby")->connects(), 1);
}

TEST_F(DaemonTest, AStepHeldWhenItsSchedulerIsLostIsAdoptedByTheNext) {
  auto first = std::make_unique<FakeScheduler>(root_.path() + "/first",
                                               storeDir_, net_, "fake://first");
  schedulers_ = {first->endpoint, sched_.endpoint};
  startDaemon();
  ASSERT_TRUE(pumpUntil(*first, [&] { return daemon_->welcomed(); }));
  EXPECT_EQ(sched_.last<proto::Hello>(), nullptr);  // the first answered

  auto in = first->store.addText("greeting", "hi", {});
  sched_.store.addText("greeting", "hi", {});  // step() reads its info here
  // Shell builtins only (the builder has no PATH); each build leaves a line.
  std::string builds = root_.path() + "/builds";
  auto m = step(
      7, "greet",
      "echo built >> " + builds + "; read x < $input; echo \"$x\" > $out", in);
  first->send(m);
  ASSERT_TRUE(
      pumpUntil(*first, [&] { return first->last<proto::NeedPaths>(); }));
  first->serve(*first->last<proto::NeedPaths>());
  ASSERT_TRUE(
      pumpUntil(*first, [&] { return first->last<proto::StepResult>(); }));
  ASSERT_EQ(first->last<proto::StepResult>()->status,
            proto::StepStatus::kSuccess);

  // The first scheduler dies before it acknowledges the result; the next
  // one hears of the step in the worker's Hello and adopts it (after the
  // round's pause, at most reconnectMax).
  first->link->setConnected(false);
  ASSERT_TRUE(pumpUntil([&] { return !daemon_->welcomed(); }));
  first.reset();
  clock_.advance(10s);
  sched_.adopt = {7};
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::StepResult>(); }))
      << error_;
  ASSERT_NE(sched_.last<proto::Hello>(), nullptr);
  EXPECT_EQ(sched_.last<proto::Hello>()->heldSteps,
            (std::vector<proto::HeldStep>{{7, m.drvPath, true}}));
  auto result = *sched_.last<proto::StepResult>();
  EXPECT_EQ(result.status, proto::StepStatus::kSuccess) << result.errorMsg;
  ASSERT_EQ(result.outputs.size(), 1u);
  EXPECT_EQ(result.outputs[0].info.path, outPath_);
  // The output came from the worker's store: uploaded, not built again,
  // and no input asked for again.
  ASSERT_EQ(sched_.uploads.size(), 1u);
  EXPECT_TRUE(sched_.uploads[0].ok) << sched_.uploads[0].error;
  EXPECT_EQ(readFile(sched_.store.physicalPath(outPath_)), "hi\n");
  EXPECT_EQ(readFile(builds), "built\n");
  EXPECT_EQ(sched_.last<proto::NeedPaths>(), nullptr);

  // Recorded by this one, and acknowledged: the worker forgets the step,
  // its next Hello holds nothing.
  sched_.send(proto::Ack{proto::MessageType::kStepResult, 7, true, ""});
  sched_.received.clear();
  sched_.send(proto::Bye{"unknown worker: send Hello again"});
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::Hello>(); }));
  EXPECT_TRUE(sched_.last<proto::Hello>()->heldSteps.empty());
}

}  // namespace
}  // namespace kiln::worker
