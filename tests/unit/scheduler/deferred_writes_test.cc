// Held state writes (deferred_writes.h): made in order, one at a time when
// the service asks (flushOne), the rest still held; a write that fails
// transiently stays first and stops flushOne until a full flush.
#include "deferred_writes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/scheduler/sql.h"

namespace kiln::scheduler {
namespace {

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
