// A worker's StepResult is acknowledged only once its record is durable
// (docs/protocol.md, "Results"): a result sent again before that is
// acknowledged with the first and recorded once, and a worker that comes
// back on a new connection meanwhile gets the Ack there.
#include <gtest/gtest.h>

#include <set>

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

// A worker back at a restarted scheduler (or a standby that took over)
// holds two steps in one slot: one whose result the old scheduler took
// without recording it (it gave the slot to the next step at once), and
// that next step, still building. Both are adopted, the one whose result
// is ready first and without keeping a slot: neither is built twice.
TEST_F(ResultAckTest, AHeldResultIsAdoptedBesideTheBuildThatTookItsSlot) {
  std::string c;
  {
    store::LocalStore store(state_);
    c = testing::makeDrv(store, "c");
  }
  svc_->addBuild(jobset_, "a", a_);
  svc_->addBuild(jobset_, "c", c);
  auto w = std::make_unique<FakeWorker>(*net_, "peer-w1", "w1");
  w->silent = true;
  w->hello(2);
  ASSERT_TRUE(until({w.get()}, [&] { return w->steps.size() == 2; }));
  svc_.reset();
  start();
  auto back = std::make_unique<FakeWorker>(*net_, "peer-w1-back", "w1");
  back->silent = true;
  auto ready = w->steps[0], building = w->steps[1];
  // The building one first: a scheduler taking them in that order would
  // have no slot left for the other.
  back->held = {{building.stepId, building.drvPath, false},
                {ready.stepId, ready.drvPath, true}};
  back->hello(1);
  ASSERT_TRUE(until({back.get()}, [&] { return back->welcomed; }));
  std::set<uint64_t> adopted(back->adopted.begin(), back->adopted.end());
  EXPECT_EQ(adopted, (std::set<uint64_t>{ready.stepId, building.stepId}));
  serviceTurns(3);
  back->pump(0ms);
  EXPECT_TRUE(back->steps.empty());  // no BuildStep: nothing starts again
  // The ready one's outputs come again, then its result: recorded once.
  back->steps = {ready};
  buildLast(*back, "out");
  ASSERT_TRUE(until({back.get()}, [&] { return !resultAcks(*back).empty(); }));
  EXPECT_TRUE(resultAcks(*back)[0].ok);
  back->steps = {building};
  buildLast(*back, "out");
  ASSERT_TRUE(
      until({back.get()}, [&] { return resultAcks(*back).size() == 2; }));
  for (auto id : {ready.stepId, building.stepId}) {
    auto row = svc_->db().step(static_cast<int64_t>(id));
    EXPECT_TRUE(row->finished);
    EXPECT_EQ(row->attempts, 1);
  }
}

}  // namespace
}  // namespace kiln::scheduler
