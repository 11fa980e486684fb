// The verifier threads' job queue (scheduler/src/step_ordered_queue.h):
// first in, first out, one job per step at a time, in order per step, and
// a job for every step alone between what came before and after it.
#include "step_ordered_queue.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln::scheduler {
namespace {

using Queue = StepOrderedQueue<std::string>;

std::string take(Queue& q) {
  auto j = q.take();
  return j ? j->second : "(none)";
}

TEST(StepOrderedQueue, StepsGoSideBySideAndEachInOrder) {
  Queue q;
  q.push(1, "1a");
  q.push(1, "1b");
  q.push(2, "2a");
  EXPECT_EQ(take(q), "1a");
  EXPECT_EQ(take(q), "2a") << "1b waits for 1a; another step goes";
  EXPECT_EQ(take(q), "(none)");
  q.done(2);
  EXPECT_EQ(take(q), "(none)") << "1a still runs";
  q.done(1);
  EXPECT_EQ(take(q), "1b");
  EXPECT_EQ(q.waiting(), 0u);
}

TEST(StepOrderedQueue, AJobForEveryStepRunsAlone) {
  Queue q;
  q.push(1, "1a");
  q.push(Queue::kAllSteps, "sweep");
  q.push(2, "2a");
  EXPECT_EQ(take(q), "1a");
  EXPECT_EQ(take(q), "(none)") << "2a overtook the sweep";
  q.done(1);
  EXPECT_EQ(take(q), "sweep");
  EXPECT_EQ(take(q), "(none)") << "something ran beside the sweep";
  q.done(Queue::kAllSteps);
  EXPECT_EQ(take(q), "2a");
  q.push(3, "3a");
  q.clear();
  EXPECT_EQ(q.waiting(), 0u);
}

}  // namespace
}  // namespace kiln::scheduler
