// The limits on what a worker may make the scheduler hold or wait for
// (docs/operations.md, "Limits"): each is exceeded by one worker, which
// sees its upload refused, its Hello refused or its step taken back, while
// the scheduler goes on serving another worker.
#include <gtest/gtest.h>

#include "memory_service.h"

namespace kiln::scheduler {
namespace {

using testing::FakeWorker;
using testing::makeDrv;

class LimitsTest : public testing::MemoryServiceTest {
 protected:
  LimitsTest() {
    configure_ = [this](ServiceConfig& c) {
      c.diskSpace = &disk_;
      c.minFreeDiskBytes = 1000;
      c.stepDeadlineMargin = std::chrono::seconds(5);
      c.maxConcurrentUploads = 1;
      c.maxQueuedUploads = 1;
      c.maxConnectionsPerKey = 2;
      c.maxSlotsPerKey = 3;
    };
  }

  // A drv of its own for each worker that must still be served.
  std::string freshDrv(const std::string& name) {
    store::LocalStore store(state_);
    return makeDrv(store, name);
  }

  // Builds `drv` on `w` (which has no step yet) and checks it succeeds.
  void expectServed(FakeWorker& w, const std::string& drv) {
    int64_t id = svc_->addBuild(jobset_, drv, drv);
    ASSERT_TRUE(until({&w}, [&] { return !w.steps.empty(); }));
    buildLast(w, "built\n");
    ASSERT_TRUE(until({&w}, [&] { return build(id).finished; }));
    EXPECT_EQ(build(id).status, 0);
  }

  // The first upload error of `w` once its uploads ended.
  std::string uploadError(FakeWorker& w) {
    EXPECT_TRUE(until({&w}, [&] { return w.pendingUploads == 0; }));
    return w.uploadErrors.empty() ? "" : w.uploadErrors.front();
  }

  FakeDiskSpace disk_{1ull << 40};
};

TEST_F(LimitsTest, AnUploadThatDoesNotFitOnTheDiskIsRefused) {
  int64_t id = svc_->addBuild(jobset_, "a", a_);
  auto w = join("w1");
  ASSERT_TRUE(until({w.get()}, [&] { return w->steps.size() == 1; }));
  // Twice the NAR plus the reserve of 1000, less one byte, is free.
  uint64_t need = 2 * testing::outputNar(std::string(100, 'x')).size() + 1000;
  disk_.set(need - 1);
  w->uploadOutputs(w->steps.back(), std::string(100, 'x'));
  std::string err = uploadError(*w);
  EXPECT_NE(err.find("does not fit on the scheduler's disk: " +
                     std::to_string(need - 1) + " bytes free, " +
                     std::to_string(need) + " needed"),
            std::string::npos)
      << err;
  store::LocalStore store(state_);
  EXPECT_FALSE(store.isValid(testing::outPath(store, a_)));
  // With room again, the same worker uploads and the build succeeds.
  disk_.set(1ull << 40);
  w->uploadErrors.clear();
  buildLast(*w, std::string(100, 'x'));
  ASSERT_TRUE(until({w.get()}, [&] { return build(id).finished; }));
  EXPECT_EQ(build(id).status, 0);
}

TEST_F(LimitsTest, UploadsBeyondTheQueueOfAConnectionAreRefused) {
  // a's output has one upload receiving and one waiting; a third (announced
  // again for the same output) is refused with the limit.
  svc_->addBuild(jobset_, "a", a_);
  auto w = join("w1");
  ASSERT_TRUE(until({w.get()}, [&] { return w->steps.size() == 1; }));
  auto step = w->steps.back();
  for (int i = 0; i < 3; ++i) w->uploadOutputs(step, "built\n");
  std::string err = uploadError(*w);
  EXPECT_NE(err.find("too many transfers waiting (the receiver's limit is 1)"),
            std::string::npos)
      << err;
  auto w2 = join("w2");
  expectServed(*w2, freshDrv("other"));
}

TEST_F(LimitsTest, HellosBeyondTheConnectionsOrSlotsOfAKeyAreRefused) {
  auto hello = [&](const std::string& peer, uint32_t slots) {
    protocol::Hello h;
    h.workerId = peer;
    h.storeDir = "/nix/store";
    h.systems = {"x86_64-linux"};
    h.slots = slots;
    net_->deliver(peer, h, "farm-key");
  };
  auto answer = [&](const std::string& peer) -> std::string {
    std::string got;
    until({}, [&] {
      for (auto& m : net_->take(peer)) {
        if (std::holds_alternative<protocol::Welcome>(m)) got = "welcome";
        if (auto* r = std::get_if<protocol::Refused>(&m)) got = r->reason;
      }
      return !got.empty();
    });
    return got;
  };
  hello("k1", 1);
  EXPECT_EQ(answer("k1"), "welcome");
  hello("k2", 3);  // 4 slots on one key, the limit is 3
  EXPECT_EQ(answer("k2"),
            "worker key 'farm-key' would have 4 slots, more than the limit "
            "of 3 per key: give this worker fewer slots, or raise kiln "
            "scheduler --max-slots-per-key");
  hello("k3", 1);
  EXPECT_EQ(answer("k3"), "welcome");
  hello("k4", 1);  // a third connection, the limit is 2
  EXPECT_EQ(answer("k4"),
            "worker key 'farm-key' already has 2 connections, the limit per "
            "key: give each worker its own key, or raise kiln scheduler "
            "--max-connections-per-key");
  // The welcomed ones leave (they would take the next step and never
  // answer); a worker of another key is served.
  for (auto p : {"k1", "k3"})
    net_->deliver(p, protocol::Bye{"done"}, "farm-key");
  auto w = join("w-other-key");
  expectServed(*w, freshDrv("other"));
}

TEST_F(LimitsTest, AStepWithoutResultPastItsTimeoutIsTakenBack) {
  int64_t id = svc_->addBuild(jobset_, "a", a_);
  svc_->db().db().exec("UPDATE builds SET timeout = 10 WHERE id = " +
                       std::to_string(id));
  // The scheduler keeps a build's limits from when it ingested the row: a
  // restart reads the changed row.
  svc_.reset();
  start();
  auto w = join("w1");
  auto w2 = join("w2");
  ASSERT_TRUE(until({w.get(), w2.get()},
                    [&] { return w->steps.size() + w2->steps.size() == 1; }));
  FakeWorker& busy = w->steps.empty() ? *w2 : *w;
  FakeWorker& other = w->steps.empty() ? *w : *w2;
  EXPECT_EQ(busy.steps.back().timeoutSec, 10u);
  // Both keep beating; the busy one never answers. At 15 s (timeout plus
  // the margin of 5) nothing happens yet; past it the step is taken back.
  auto tick = [&](int seconds) {
    clock_.advance(std::chrono::seconds(seconds));
    busy.heartbeat();
    other.heartbeat();
    until({&busy, &other}, [] { return true; });
  };
  tick(15);
  EXPECT_FALSE(build(id).finished);
  tick(1);
  ASSERT_TRUE(until({&busy}, [&] { return build(id).finished; }));
  EXPECT_EQ(build(id).status, static_cast<int>(StepStatus::kTimedOut));
  ASSERT_EQ(busy.cancels.size(), 1u);
  EXPECT_EQ(busy.cancels[0].stepId, busy.steps.back().stepId);
  EXPECT_NE(busy.cancels[0].reason.find("taken back"), std::string::npos);
  auto row = svc_->db().stepByDrv(a_);
  ASSERT_TRUE(row);
  EXPECT_NE(row->error.find("timeout plus the scheduler's margin of 5 s"),
            std::string::npos)
      << row->error;
  // A late result is refused; once the busy worker left, the other one is
  // still served.
  busy.result(busy.steps.back().stepId, protocol::StepStatus::kSuccess);
  ASSERT_TRUE(until(
      {&busy}, [&] { return !busy.acks.empty() && !busy.acks.back().ok; }));
  busy.send(protocol::Bye{"done"});
  expectServed(other, freshDrv("other"));
}

}  // namespace
}  // namespace kiln::scheduler
