// Release engineering's rows (release_store.h) on both backends: aggregate
// constituents, a jobset's channel job and the channel's advances (only to
// a newer evaluation whose channel-job build succeeded), the evaluations'
// kept sources and the outputs a channel lists.
#include "kiln/scheduler/release_store.h"

#include <gtest/gtest.h>

#include <map>

#include "jobset_fixture.h"

namespace kiln::scheduler {
namespace {

std::string path(char c, const std::string& name) {
  return "/nix/store/" + std::string(32, c) + "-" + name;
}

class ReleaseStoreTest : public test::JobsetFixture {
 protected:
  /// A build of `job` in `eval`, finished with `status` (-1: unfinished),
  /// whose output is path(c, job).
  int64_t build(int64_t eval, const std::string& job, char c, int status) {
    int64_t id = JobsetFixture::build(eval, job, path(c, job + ".drv"));
    db_.setBuildOutputs(id, {{"out", path(c, job)}});
    if (status >= 0) db_.finishBuild(id, status, 2, "");
    return id;
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, ReleaseStoreTest, test::allStateBackends(),
                         test::stateBackendName);

TEST_P(ReleaseStoreTest, ConstituentsAreListedByJob) {
  int64_t e = eval("a");
  int64_t lib = build(e, "lib", 'a', 0), app = build(e, "app", 'b', 1);
  int64_t tested = build(e, "tested", 'c', -1);
  EXPECT_FALSE(isAggregate(db_, tested));
  EXPECT_TRUE(aggregateConstituents(db_, tested).empty());
  addAggregateConstituents(db_, {{tested, lib}, {tested, app}});
  addAggregateConstituents(db_, {{tested, lib}});  // idempotent
  EXPECT_TRUE(isAggregate(db_, tested));
  auto c = aggregateConstituents(db_, tested);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].job, "app");
  EXPECT_EQ(c[0].status, 1);
  EXPECT_EQ(c[1].id, lib);
  EXPECT_FALSE(isAggregate(db_, lib));
}

TEST_P(ReleaseStoreTest, ManyConstituentsGoInSeveralStatements) {
  int64_t e = eval("a");
  int64_t agg = build(e, "all", 'z', -1);
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (int i = 0; i < 600; ++i)
    edges.emplace_back(agg, build(e, "j" + std::to_string(1000 + i), 'a', 0));
  addAggregateConstituents(db_, edges);
  EXPECT_EQ(aggregateConstituents(db_, agg).size(), 600u);
}

TEST_P(ReleaseStoreTest, TheChannelJobIsDeclaredPerJobset) {
  EXPECT_EQ(db_.jobset(jobset_)->channelJob, "tested");
  JobsetRow j = *db_.jobset(jobset_);
  j.channelJob = "release.tested";
  db_.updateJobset(j);
  EXPECT_EQ(db_.jobset(jobset_)->channelJob, "release.tested");
  j.channelJob = "";
  EXPECT_THROW(db_.updateJobset(j), SchedulerStateError);
  j.channelJob = "a\nb";
  EXPECT_THROW(db_.updateJobset(j), SchedulerStateError);
  j.channelJob = std::string(201, 'x');
  EXPECT_THROW(db_.updateJobset(j), SchedulerStateError);
}

TEST_P(ReleaseStoreTest, TheChannelAdvancesOnlyToNewerSucceededEvaluations) {
  int64_t e1 = eval("git:1"), e2 = eval("git:2"), e3 = eval("git:3");
  int64_t failed = build(e1, "tested", 'a', 2);
  int64_t other = build(e1, "lib", 'b', 0);
  EXPECT_FALSE(advanceChannel(db_, failed, 10));  // did not succeed
  EXPECT_FALSE(advanceChannel(db_, other, 10));   // not the channel job
  EXPECT_FALSE(latestChannelAdvance(db_, jobset_));
  int64_t unfinished = build(e2, "tested", 'c', -1);
  EXPECT_FALSE(advanceChannel(db_, unfinished, 11));

  int64_t third = build(e3, "tested", 'd', 0);
  auto a = advanceChannel(db_, third, 12);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->eval, e3);
  EXPECT_EQ(a->build, third);
  EXPECT_EQ(a->timeMs, 12);
  EXPECT_FALSE(advanceChannel(db_, third, 13));  // already there
  // An older evaluation finishing later does not move it back.
  db_.finishBuild(unfinished, 0, 14, "");
  EXPECT_FALSE(advanceChannel(db_, unfinished, 14));
  EXPECT_EQ(latestChannelAdvance(db_, jobset_)->eval, e3);

  int64_t e4 = eval("git:4");
  int64_t fourth = build(e4, "tested", 'e', 0);
  ASSERT_TRUE(advanceChannel(db_, fourth, 15));
  auto history = channelAdvances(db_, jobset_, 10);
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0].eval, e4);
  EXPECT_EQ(history[1].eval, e3);
  EXPECT_EQ(channelAdvances(db_, jobset_, 1).size(), 1u);
  EXPECT_THROW(channelAdvances(db_, jobset_, 0), SchedulerStateError);
}

TEST_P(ReleaseStoreTest, AChannelListsTheSucceededOutputsAndKeepsSources) {
  int64_t e = eval("a");
  build(e, "lib", 'a', 0);
  build(e, "app", 'b', 1);
  build(e, "docs", 'c', -1);
  int64_t again = build(e, "lib2", 'a', 0);
  db_.setBuildOutputs(again, {{"out", path('a', "lib")}});
  // Two builds of the same output: listed once; failed and unfinished
  // builds' outputs are not listed.
  EXPECT_EQ(succeededOutputs(db_, e),
            std::vector<std::string>({path('a', "lib")}));
  EXPECT_EQ(evalSources(db_, e), "");
  setEvalSources(db_, e, path('s', "source"));
  EXPECT_EQ(evalSources(db_, e), path('s', "source"));
  EXPECT_THROW(setEvalSources(db_, e, "relative"), SchedulerStateError);
}

TEST_P(ReleaseStoreTest, RegressionsAreJobsGrownPastTheLimits) {
  int64_t base = eval("git:1"), now = eval("git:2");
  // A build whose step ran `ms` ms.
  auto ran = [&](int64_t e, const std::string& job, char c, int64_t ms) {
    int64_t id = build(e, job, c, 0);
    StepRow s;
    s.drvPath = path(c, job + ".drv");
    int64_t step = db_.upsertStep(s);
    db_.startStep(step, "w", 1000);
    db_.finishStep(step, 0, 1000 + ms, "");
    return id;
  };
  ran(base, "lib", 'a', 20'000);
  ran(now, "lib", 'b', 35'000);  // +75 % time
  ran(base, "app", 'c', 1'000);
  ran(now, "app", 'd', 9'000);  // +800 %, but under 10 s before: noise
  build(base, "docs", 'e', 0);
  build(now, "docs", 'f', 0);  // closure +60 %
  build(base, "same", 'g', 0);
  build(now, "same", 'g', 0);  // the same output: not compared
  build(now, "new", 'h', 0);   // not in the base
  build(base, "broken", 'i', 0);
  build(now, "broken", 'j', 1);  // failed now: not compared
  std::map<std::string, int64_t> sizes = {
      {path('a', "lib"), 100},   {path('b', "lib"), 120},
      {path('e', "docs"), 1000}, {path('f', "docs"), 1600},
      {path('c', "app"), 10},    {path('d', "app"), 10}};
  ClosureSizeFn closure = [&](const std::string& p) -> std::optional<int64_t> {
    auto it = sizes.find(p);
    if (it == sizes.end()) return std::nullopt;
    return it->second;
  };
  EXPECT_TRUE(findRegressions(db_, now, base, 0, 0, closure).empty());
  auto found = findRegressions(db_, now, base, 50, 50, closure);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].job, "docs");
  EXPECT_EQ(found[0].kind, "closure");
  EXPECT_EQ(found[0].before, 1000);
  EXPECT_EQ(found[0].after, 1600);
  EXPECT_EQ(found[0].baseEval, base);
  EXPECT_EQ(found[1].job, "lib");
  EXPECT_EQ(found[1].kind, "time");
  EXPECT_EQ(found[1].before, 20'000);
  EXPECT_EQ(found[1].after, 35'000);
  // Higher limits: nothing.
  EXPECT_TRUE(findRegressions(db_, now, base, 60, 80, closure).empty());
  // lib's closure grew 20 %.
  EXPECT_EQ(findRegressions(db_, now, base, 10, 0, closure).size(), 2u);

  EXPECT_TRUE(evalRegressions(db_, now).empty());
  recordRegressions(db_, now, found);
  recordRegressions(db_, now, found);  // replaces
  auto kept = evalRegressions(db_, now);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[1].job, "lib");
  EXPECT_EQ(kept[1].after, 35'000);
}

TEST_P(ReleaseStoreTest, GrowthLimitsAreDeclaredPerJobset) {
  JobsetRow j = *db_.jobset(jobset_);
  EXPECT_EQ(j.maxClosureGrowthPct, 0);
  j.maxClosureGrowthPct = 10;
  j.maxBuildTimeGrowthPct = 25;
  db_.updateJobset(j);
  EXPECT_EQ(db_.jobset(jobset_)->maxClosureGrowthPct, 10);
  EXPECT_EQ(db_.jobset(jobset_)->maxBuildTimeGrowthPct, 25);
  j.maxBuildTimeGrowthPct = -1;
  EXPECT_THROW(db_.updateJobset(j), SchedulerStateError);
}

}  // namespace
}  // namespace kiln::scheduler
