// A worker's StepResult is acknowledged only once its record is durable
// (docs/protocol.md, "Results"): a result sent again before that is
// acknowledged with the first and recorded once, and a worker that comes
// back on a new connection meanwhile gets the Ack there.
#include <gtest/gtest.h>

#include "kiln/store/local_store.h"
#include "memory_service.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;
using testing::FakeWorker;

class ResultAckTest : public testing::MemoryServiceTest {
 protected:
  // The StepResult Acks `w` received.
  static std::vector<protocol::Ack> resultAcks(const FakeWorker& w) {
    std::vector<protocol::Ack> out;
    for (auto& a : w.acks)
      if (a.subject == protocol::MessageType::kStepResult) out.push_back(a);
    return out;
  }

  // Uploads the output of `w`'s last step and waits until the scheduler
  // registered it (a result sent then is settled at once).
  void uploadAndRegister(FakeWorker& w, const std::string& drv) {
    w.uploadOutputs(w.steps.back(), "a-out");
    ASSERT_TRUE(until({&w}, [&] { return w.pendingUploads == 0; }));
    ASSERT_TRUE(w.uploadErrors.empty()) << w.uploadErrors.front();
    store::LocalStore store(state_);
    auto out = testing::outPath(store, drv);
    ASSERT_TRUE(until({&w}, [&] { return store.isValid(out); }));
  }

  // Turns of the service alone, its messages left for the workers.
  void serviceTurns(int n) {
    for (int i = 0; i < n; i++) svc_->pollOnce(0ms);
  }
};

TEST_F(ResultAckTest, AResultSentTwiceIsRecordedOnceAndAcknowledgedOnce) {
  int64_t build = svc_->addBuild(jobset_, "a", a_);
  auto w = join("w1");
  ASSERT_TRUE(until({w.get()}, [&] { return w->steps.size() == 1; }));
  uploadAndRegister(*w, a_);
  if (HasFatalFailure()) return;
  uint64_t id = w->steps[0].stepId;
  // Both arrive before the record's write (held until the turn's end).
  w->result(id, protocol::StepStatus::kSuccess);
  w->result(id, protocol::StepStatus::kSuccess);
  ASSERT_TRUE(until({w.get()}, [&] { return !resultAcks(*w).empty(); }));
  serviceTurns(3);
  w->pump(0ms);
  // The Ack went out after the row committed, once.
  auto row = svc_->db().step(static_cast<int64_t>(id));
  ASSERT_TRUE(row);
  EXPECT_TRUE(row->finished);
  EXPECT_EQ(row->status, 0);
  EXPECT_EQ(row->attempts, 1);
  auto acks = resultAcks(*w);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_TRUE(acks[0].ok) << acks[0].error;
  EXPECT_EQ(acks[0].id, id);
  EXPECT_TRUE(this->build(build).finished);
  // Once recorded and acknowledged, the step is no longer the worker's.
  w->result(id, protocol::StepStatus::kSuccess);
  ASSERT_TRUE(until({w.get()}, [&] { return resultAcks(*w).size() == 2; }));
  EXPECT_FALSE(resultAcks(*w)[1].ok);
  EXPECT_EQ(svc_->db().step(static_cast<int64_t>(id))->attempts, 1);
}

// The worker comes back on a new connection (it lost the old one) after
// the scheduler took its result and before that result is recorded: its
// Hello's held step is adopted and the Ack goes to the new connection.
TEST_F(ResultAckTest, AWorkerBackBeforeTheRecordGetsTheAckOnItsNewConnection) {
  svc_->addBuild(jobset_, "a", a_);
  auto w = join("w1");
  ASSERT_TRUE(until({w.get()}, [&] { return w->steps.size() == 1; }));
  uploadAndRegister(*w, a_);
  if (HasFatalFailure()) return;
  auto step = w->steps[0];
  auto again = std::make_unique<FakeWorker>(*net_, "peer-w1-again", "w1");
  again->silent = true;
  again->held = {{step.stepId, step.drvPath}};
  // One turn handles all three (the writes they cause wait for its end):
  // the result, the Hello on the new connection, and the result that
  // connection sends again (after its Welcome, in truth).
  w->result(step.stepId, protocol::StepStatus::kSuccess);
  again->hello();
  again->result(step.stepId, protocol::StepStatus::kSuccess);
  svc_->pollOnce(0ms);
  ASSERT_TRUE(
      until({again.get()}, [&] { return !resultAcks(*again).empty(); }));
  serviceTurns(3);
  again->pump(0ms);
  w->pump(0ms);
  EXPECT_EQ(again->adopted, std::vector<uint64_t>{step.stepId});
  // One Ack, on the new connection, after the row committed; recorded
  // once.
  auto acks = resultAcks(*again);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_TRUE(acks[0].ok) << acks[0].error;
  EXPECT_TRUE(resultAcks(*w).empty());
  auto row = svc_->db().step(static_cast<int64_t>(step.stepId));
  EXPECT_TRUE(row->finished);
  EXPECT_EQ(row->status, 0);
  EXPECT_EQ(row->attempts, 1);
}

}  // namespace
}  // namespace kiln::scheduler
