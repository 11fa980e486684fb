// DeferredWrites (scheduler/src/deferred_writes.h): what waits for a write
// (a worker's Ack) hears of it only once the write committed, or that it
// was dropped; never while the database is away. Held writes are made in
// order, one at a time when the service asks (flushOne); one that fails
// transiently stays first and stops flushOne until a full flush.
#include "deferred_writes.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/scheduler/sql.h"

namespace kiln::scheduler {
namespace {

// A write that fails transiently while `away`, for good while `refused`
// (another scheduler holds the farm), and otherwise commits (`commits`).
struct FakeDatabase {
  bool away = false;
  bool refused = false;
  std::vector<int> commits;

  std::function<void()> write(int n) {
    return [this, n] {
      if (away) throw SqlError("connection lost", true);
      if (refused) throw SqlError("the farm's lock is held elsewhere", false);
      commits.push_back(n);
    };
  }
};

class DeferredWritesTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  DeferredWrites writes_{clock_};
  FakeDatabase db_;
  std::vector<std::pair<int, bool>> done_;

  DeferredWrites::Done done(int n) {
    return [this, n](bool committed) { done_.emplace_back(n, committed); };
  }
};

TEST_F(DeferredWritesTest, DoneFollowsTheCommitAtOnce) {
  writes_.run(db_.write(1), done(1));
  EXPECT_EQ(db_.commits, std::vector<int>{1});
  EXPECT_EQ(done_, (std::vector<std::pair<int, bool>>{{1, true}}));
}

TEST_F(DeferredWritesTest, DoneWaitsWhileTheDatabaseIsAway) {
  db_.away = true;
  writes_.run(db_.write(1), done(1));
  writes_.run(db_.write(2));  // nothing waits for this one
  writes_.run(db_.write(3), done(3));
  EXPECT_EQ(writes_.flush(), 3u);
  EXPECT_TRUE(done_.empty());
  EXPECT_TRUE(db_.commits.empty());
  db_.away = false;
  EXPECT_EQ(writes_.flush(), 0u);
  EXPECT_EQ(db_.commits, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(done_, (std::vector<std::pair<int, bool>>{{1, true}, {3, true}}));
}

TEST_F(DeferredWritesTest, DoneWaitsForTheEndOfAHold) {
  {
    DeferredWrites::Hold hold(writes_);
    writes_.run(db_.write(1), done(1));
    EXPECT_TRUE(done_.empty());
    EXPECT_TRUE(db_.commits.empty());
  }
  EXPECT_EQ(done_, (std::vector<std::pair<int, bool>>{{1, true}}));
}

TEST_F(DeferredWritesTest, AWriteRefusedForGoodIsDroppedAndSaysSo) {
  db_.away = true;
  writes_.run(db_.write(1), done(1));
  // The database is back, but another scheduler holds the farm now.
  db_.away = false;
  db_.refused = true;
  EXPECT_EQ(writes_.flush(), 0u);
  EXPECT_EQ(done_, (std::vector<std::pair<int, bool>>{{1, false}}));
  // Refused at once: the error propagates after `done`.
  EXPECT_THROW(writes_.run(db_.write(2), done(2)), SqlError);
  EXPECT_EQ(done_.back(), std::make_pair(2, false));
  EXPECT_TRUE(db_.commits.empty());
}

TEST_F(DeferredWritesTest, DoneMayQueueAWriteOfItsOwn) {
  db_.away = true;
  writes_.run(db_.write(1), [this](bool) { writes_.run(db_.write(10)); });
  db_.away = false;
  EXPECT_EQ(writes_.flush(), 0u);
  EXPECT_EQ(db_.commits, (std::vector<int>{1, 10}));
}

TEST(DeferredWrites, HeldWritesAreMadeOneAtATimeInOrder) {
  FakeClock clock;
  DeferredWrites writes(clock);
  std::vector<int> made;
  {
    DeferredWrites::Hold hold(writes);
    for (int i = 0; i < 3; i++) writes.run([&, i] { made.push_back(i); });
    EXPECT_TRUE(made.empty());
    EXPECT_TRUE(writes.flushOne());
    EXPECT_EQ(made, std::vector<int>{0});
    writes.run([&] { made.push_back(3); });  // behind the held ones
    EXPECT_EQ(writes.pending(), 3u);
  }
  EXPECT_EQ(made, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_FALSE(writes.flushOne());  // none waits
}

TEST(DeferredWrites, AWriteThatFailsTransientlyStaysFirst) {
  FakeClock clock;
  DeferredWrites writes(clock);
  bool away = true;
  std::vector<int> made;
  {
    DeferredWrites::Hold hold(writes);
    writes.run([&] {
      if (away) throw SqlError("the database is away", true);
      made.push_back(0);
    });
    writes.run([&] { made.push_back(1); });
    EXPECT_FALSE(writes.flushOne());
    EXPECT_FALSE(writes.flushOne());  // stalled: the periodic flush retries
    away = false;
  }
  EXPECT_TRUE(made.empty());  // the hold's end leaves the retries paced
  EXPECT_EQ(writes.flush(), 0u);
  EXPECT_EQ(made, (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace kiln::scheduler
