// The binary cache's GC roots (cache_roots.h) on both backends: pins, and
// the outputs of each jobset's latest finished evaluations.
#include "kiln/scheduler/cache_roots.h"

#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "kiln/scheduler/state_db.h"
#include "state_backends.h"

namespace kiln::scheduler {
namespace {

std::string out(char c) { return "/nix/store/" + std::string(32, c) + "-out"; }

class CacheRootsTest : public ::testing::TestWithParam<test::StateBackend> {
 protected:
  int64_t jobset(StateDb& db, const std::string& name) {
    if (!project_) project_ = db.createProject({0, "p", "", true});
    JobsetRow j;
    j.project = project_;
    j.name = name;
    j.location = "/src";
    return db.createJobset(j);
  }
  /// An evaluation of `js` with one build whose output is out(c).
  void eval(StateDb& db, int64_t js, char c, bool finished) {
    int64_t e =
        db.createEvaluation({0, js, std::string(1, c), 1, 1, 1, ""}, {});
    BuildRow b;
    b.eval = e;
    b.jobset = js;
    b.job = "j";
    b.drvPath = "/nix/store/" + std::string(32, c) + "-j.drv";
    int64_t id = db.createBuild(b);
    db.setBuildOutputs(id, {{"out", out(c)}});
    if (finished) db.finishBuild(id, 0, 2, "");
  }

  TempDir dir_{"kiln-cache-roots"};
  DatabaseSpec spec_ = test::freshStateDatabase(GetParam(), dir_.path());
  int64_t project_ = 0;
};

INSTANTIATE_TEST_SUITE_P(Backends, CacheRootsTest, test::allStateBackends(),
                         test::stateBackendName);

TEST_P(CacheRootsTest, PinsAreAddedMovedListedAndRemoved) {
  StateDb db(spec_);
  CachePinStore pins(db);
  pins.add("release", out('a'), 10);
  pins.add("base", out('b'), 11);
  pins.add("release", out('c'), 12);  // moves the pin
  auto list = pins.list();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "base");
  EXPECT_EQ(list[1].path, out('c'));
  EXPECT_EQ(list[1].createdMs, 12);
  EXPECT_TRUE(pins.remove("base"));
  EXPECT_FALSE(pins.remove("base"));
  EXPECT_EQ(pins.list().size(), 1u);
}

TEST_P(CacheRootsTest, BadPinsAreRefused) {
  StateDb db(spec_);
  CachePinStore pins(db);
  EXPECT_THROW(pins.add("", out('a'), 1), SchedulerStateError);
  EXPECT_THROW(pins.add("a b", out('a'), 1), SchedulerStateError);
  EXPECT_THROW(pins.add(std::string(201, 'x'), out('a'), 1),
               SchedulerStateError);
  EXPECT_THROW(pins.add("ok", "relative", 1), SchedulerStateError);
  EXPECT_TRUE(pins.list().empty());
}

TEST_P(CacheRootsTest, LatestFinishedEvaluationsOfEachJobset) {
  StateDb db(spec_);
  int64_t one = jobset(db, "one"), two = jobset(db, "two");
  eval(db, one, 'a', true);
  eval(db, one, 'b', true);
  eval(db, one, 'c', false);  // still building: kept, does not count
  eval(db, two, 'd', true);
  eval(db, two, 'f', true);
  using Set = std::set<std::string>;
  EXPECT_EQ(latestEvaluationOutputs(db, 1),
            (Set{out('b'), out('c'), out('f')}));
  EXPECT_EQ(latestEvaluationOutputs(db, 2),
            (Set{out('a'), out('b'), out('c'), out('d'), out('f')}));
  EXPECT_THROW(latestEvaluationOutputs(db, 0), SchedulerStateError);
}

}  // namespace
}  // namespace kiln::scheduler
