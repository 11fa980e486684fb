// The farm's lock whose session ended (service_lock.cc): the scheduler
// notices it before its next dispatch (SchedulerLock::sessionEnded, a
// poll(2) on PostgreSQL; a fake here), dispatches nothing more, and either
// holds the lock again and goes on, or stops when another scheduler holds
// it. A worker joining meanwhile is welcomed from memory.
#include <gtest/gtest.h>

#include <atomic>

#include "kiln/common/file_lock.h"
#include "memory_service.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;

// A lock whose session the test ends.
class EndingLock : public SchedulerLock {
 public:
  bool held() override { return !ended; }
  bool sessionEnded() override { return ended; }
  std::string describe() const override { return "the test's lock"; }
  std::atomic<bool> ended{false};
};

class LockSessionTest : public testing::MemoryServiceTest {
 protected:
  void SetUp() override {
    configure_ = [this](ServiceConfig& c) { c.heldLock = lock_; };
    MemoryServiceTest::SetUp();
  }

  std::shared_ptr<EndingLock> lock_ = std::make_shared<EndingLock>();
};

TEST_F(LockSessionTest, NothingIsDispatchedOnceAnotherSchedulerHoldsIt) {
  // Another scheduler holds the farm (its lock file here) once ours ended.
  auto other =
      FileLock::tryAcquire(state_ + "/scheduler.lock", LockMode::kExclusive);
  ASSERT_TRUE(other);
  lock_->ended = true;
  svc_->addBuild(jobset_, "a", a_);
  auto w = join("w1");  // welcomed all the same
  for (int turn = 0; turn < 20; ++turn) {
    svc_->pollOnce(0ms);
    w->pump(0ms);
    clock_.advance(100ms);
  }
  EXPECT_TRUE(w->steps.empty());
  auto row = svc_->db().stepByDrv(a_);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->attempts, 0);
  std::atomic<bool> stop{false};
  EXPECT_THROW(svc_->run(stop), Error);  // it stops scheduling
}

TEST_F(LockSessionTest, DispatchingGoesOnOnceTheLockIsHeldAgain) {
  auto w = join("w1");
  lock_->ended = true;  // nobody else holds the farm: taken again
  svc_->addBuild(jobset_, "a", a_);
  ASSERT_TRUE(until({w.get()}, [&] { return w->steps.size() == 1; }));
  EXPECT_EQ(svc_->db().stepByDrv(a_)->attempts, 1);
  std::atomic<bool> stop{true};
  EXPECT_NO_THROW(svc_->run(stop));
}

}  // namespace
}  // namespace kiln::scheduler
