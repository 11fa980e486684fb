// The forge requests' database part (forge_requests.h) on both backends: a
// push names the jobsets following its branch of its repository; a pull
// request gets a jobset of its own, its previous head's builds are named
// for cancelling, closing disables it and the sweep after the grace
// period names its builds once; a replayed delivery changes nothing.
#include "kiln/scheduler/forge_requests.h"

#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "kiln/scheduler/forge_store.h"
#include "kiln/scheduler/offline_requests.h"
#include "state_backends.h"

namespace kiln::scheduler {
namespace {

using nlohmann::json;

const std::string kRepo = "git://127.0.0.1:9418/pkgs.git";

json event(const std::string& delivery, const std::string& kind, char sha,
           const std::string& action = "", int64_t number = 0) {
  return {
      {"forge", "github"},
      {"delivery", delivery},
      {"projects", {"p", "unknown"}},
      {"event",
       {{"kind", kind},
        {"repo", "octo/pkgs"},
        {"urls", {"https://example/octo/pkgs", "git://127.0.0.1:9418/pkgs"}},
        {"branch", "main"},
        {"sha", std::string(40, sha)},
        {"action", action},
        {"number", number},
        {"headRef", "refs/pull/" + std::to_string(number) + "/head"},
        {"headUrl", kRepo},
        {"title", "t"}}}};
}

class ForgeRequestsTest : public ::testing::TestWithParam<test::StateBackend> {
 protected:
  void SetUp() override {
    db_ = std::make_unique<StateDb>(spec_);
    project_ = db_->createProject({0, "p", "", true});
    main_ = addJobset("main", "main", kRepo);
    addJobset("other-branch", "next", kRepo);
    addJobset("other-repo", "main", "git://127.0.0.1:9418/else.git");
  }
  int64_t addJobset(const std::string& name, const std::string& branch,
                    const std::string& location) {
    JobsetRow j;
    j.project = project_;
    j.name = name;
    j.kind = "git";
    j.location = location;
    j.branch = branch;
    j.file = "ci.nix";
    return db_->createJobset(j);
  }
  // An unfinished build in `jobset`.
  int64_t build(int64_t jobset, char c) {
    int64_t e = db_->createEvaluation({0, jobset, "git:x", 1, 1, 1, ""}, {});
    BuildRow b;
    b.eval = e;
    b.jobset = jobset;
    b.job = "j";
    b.drvPath = "/nix/store/" + std::string(32, c) + "-j.drv";
    return db_->createBuild(b);
  }

  TempDir dir_{"kiln-forge"};
  DatabaseSpec spec_ = test::freshStateDatabase(GetParam(), dir_.path());
  std::unique_ptr<StateDb> db_;
  int64_t project_ = 0, main_ = 0;
};

INSTANTIATE_TEST_SUITE_P(Backends, ForgeRequestsTest, test::allStateBackends(),
                         test::stateBackendName);

TEST_P(ForgeRequestsTest, PushEvaluatesTheFollowingJobsetAtItsCommit) {
  ForgeActions r = applyForgeEvent(*db_, event("d1", "push", 'a'), 100);
  ASSERT_EQ(r.evaluate.size(), 1u);
  EXPECT_EQ(r.evaluate[0].jobset, main_);
  EXPECT_EQ(r.evaluate[0].revision, std::string(40, 'a'));
  EXPECT_TRUE(r.cancel.empty());
  EXPECT_EQ(ForgeStore(*db_).jobset(main_)->repo, "octo/pkgs");
  // Queued as a `jobset-eval` request at the commit, which whoever takes
  // it (the scheduler, an evaluator host) reads with evalJobsetOf.
  auto pending = db_->pendingRequests();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].id, r.evaluate[0].request);
  EXPECT_EQ(pending[0].kind, "jobset-eval");
  EXPECT_EQ(r.answer["evalRequests"], json::array({r.evaluate[0].request}));
  JobsetRow js = evalJobsetOf(*db_, json::parse(pending[0].args));
  EXPECT_EQ(js.id, main_);
  EXPECT_EQ(js.revision, std::string(40, 'a'));
  json args = json::parse(pending[0].args);
  for (const char* rev : {"HEAD", "abc", "main"}) {
    args["revision"] = rev;
    EXPECT_THROW(evalJobsetOf(*db_, args), SchedulerStateError) << rev;
  }
  args.erase("revision");
  EXPECT_EQ(evalJobsetOf(*db_, args).revision, "");
  JobsetRow folder;  // a path jobset has no commits
  folder.project = project_;
  folder.name = "folder";
  folder.kind = "path";
  folder.location = "/src";
  db_->createJobset(folder);
  json folderArgs{{"project", "p"},
                  {"jobset", "folder"},
                  {"revision", std::string(40, 'a')}};
  EXPECT_THROW(evalJobsetOf(*db_, folderArgs), SchedulerStateError);
  // The same delivery again: nothing.
  ForgeActions again = applyForgeEvent(*db_, event("d1", "push", 'b'), 200);
  EXPECT_TRUE(again.evaluate.empty());
  EXPECT_TRUE(again.answer.contains("ignored"));
  // Malformed: the caller's error.
  json bad = event("d2", "push", 'a');
  bad["event"]["sha"] = "HEAD";
  EXPECT_THROW(applyForgeEvent(*db_, bad, 300), SchedulerStateError);
}

TEST_P(ForgeRequestsTest, PullRequestLifecycle) {
  ForgeActions open =
      applyForgeEvent(*db_, event("o", "pull_request", 'a', "open", 7), 100);
  auto pr = db_->jobsetByName("p", "pr-7");
  ASSERT_TRUE(pr);
  EXPECT_EQ(pr->branch, "refs/pull/7/head");
  EXPECT_EQ(pr->file, "ci.nix");  // the base's settings
  EXPECT_EQ(pr->checkIntervalSec, 0);
  ASSERT_EQ(open.evaluate.size(), 1u);
  EXPECT_EQ(open.evaluate[0].jobset, pr->id);
  auto row = ForgeStore(*db_).jobset(pr->id);
  EXPECT_EQ(row->baseJobset, main_);
  EXPECT_EQ(row->number, 7);

  // A new head: the old head's unfinished builds are named.
  int64_t old1 = build(pr->id, '1');
  int64_t other = build(main_, '2');
  ForgeActions upd =
      applyForgeEvent(*db_, event("u", "pull_request", 'b', "update", 7), 200);
  EXPECT_EQ(upd.cancel, std::vector<int64_t>{old1});
  EXPECT_EQ(upd.evaluate.at(0).revision, std::string(40, 'b'));
  EXPECT_EQ(ForgeStore(*db_).jobset(pr->id)->head, std::string(40, 'b'));
  (void)other;

  // Closed: disabled at once, its builds named by the sweep after the
  // grace period, once.
  int64_t queued = build(pr->id, '3');
  applyForgeEvent(*db_, event("c", "pull_request", 'b', "close", 7), 1000);
  EXPECT_FALSE(db_->jobsetByName("p", "pr-7")->enabled);
  EXPECT_TRUE(sweepClosedPulls(*db_, 999).empty());
  auto swept = sweepClosedPulls(*db_, 1000);
  EXPECT_NE(std::find(swept.begin(), swept.end(), queued), swept.end());
  EXPECT_TRUE(sweepClosedPulls(*db_, 5000).empty());
}

TEST_P(ForgeRequestsTest, OfflineRequestsSetSecretsAndCancelInTheDatabase) {
  RequestTable t = offlineRequests(*db_, RealClock::instance(), {});
  t.apply("project-webhook", {{"project", "p"}, {"secretFile", "/s"}});
  EXPECT_EQ(ForgeStore(*db_).webhookSecretFile(project_), "/s");
  EXPECT_EQ(ForgeStore(*db_).webhookProjects().at(0).name, "p");
  EXPECT_THROW(
      t.apply("project-webhook", {{"project", "p"}, {"secretFile", "rel"}}),
      SchedulerStateError);
  t.apply("forge-event", event("o", "pull_request", 'a', "open", 1));
  int64_t pr = db_->jobsetByName("p", "pr-1")->id;
  int64_t b = build(pr, '4');
  t.apply("forge-event", event("u", "pull_request", 'b', "update", 1));
  EXPECT_TRUE(db_->build(b)->finished);
  EXPECT_EQ(db_->build(b)->status, 4);
  t.apply("project-webhook", {{"project", "p"}, {"secretFile", ""}});
  EXPECT_TRUE(ForgeStore(*db_).webhookProjects().empty());
}

}  // namespace
}  // namespace kiln::scheduler
