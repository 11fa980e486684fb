// meta.maxSilent and meta.timeout from an evaluation's jobs to the builds
// table and, through a step's owner build, into the BuildStep a worker gets.
#include <gtest/gtest.h>

#include "fake_worker.h"
#include "kiln/scheduler/evaluation.h"
#include "kiln/scheduler/service.h"
#include "service_fixture.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;
using testing::FakeWorker;
using testing::pumpUntil;
using testing::makeDrv;

TEST(JobLimits, ParsedFromMetaWithDefaults) {
  const std::string drv =
      R"("drvPath":"/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-x.drv")";
  auto j = parseJobLine(R"({"attr":"x","system":"s",)" + drv +
                        R"(,"meta":{"maxSilent":5,"timeout":60}})");
  EXPECT_EQ(j.maxSilentSec, 5);
  EXPECT_EQ(j.timeoutSec, 60);
  auto d = parseJobLine(R"({"attr":"x","system":"s",)" + drv +
                        R"(,"meta":{"maxSilent":"5","timeout":1.5}})");
  EXPECT_EQ(d.maxSilentSec, 3600) << "non-integers are ignored";
  EXPECT_EQ(d.timeoutSec, 36000);
  try {
    parseJobLine(R"({"attr":"x","system":"s",)" + drv +
                 R"(,"meta":{"maxSilent":-1}})");
    ADD_FAILURE() << "a negative maxSilent was accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("meta.maxSilent is negative"),
              std::string::npos)
        << e.what();
  }
}

TEST(JobLimits, StoredWithTheBuildAndMigratedFromSchemaOne) {
  TempDir dir("kiln-limits");
  std::string path = dir.path() + "/s.sqlite";
  int64_t id = 0;
  {
    StateDb db(path);
    int64_t p = db.createProject({0, "p", "", true});
    JobsetRow js;
    js.project = p;
    js.name = "j";
    js.location = "/nowhere";
    int64_t j = db.createJobset(js);
    EvaluationRow e;
    e.jobset = j;
    e.inputsHash = "manual";
    int64_t ev = db.createEvaluation(e, {});
    BuildRow b;
    b.eval = ev;
    b.jobset = j;
    b.job = "x";
    b.drvPath = "/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-x.drv";
    b.maxSilentSec = 7;
    b.timeoutSec = 70;
    id = db.createBuild(b);
    EXPECT_EQ(db.build(id)->maxSilentSec, 7);
    EXPECT_EQ(db.build(id)->timeoutSec, 70);
    // Back to schema 1, as a database made before the limits existed.
    db.db().exec(
        "ALTER TABLE builds DROP COLUMN max_silent; "
        "ALTER TABLE builds DROP COLUMN timeout; DROP TABLE notifications; "
        "DROP TABLE api_tokens; DROP TRIGGER builds_count_insert; "
        "DROP TRIGGER builds_count_update; DROP TRIGGER builds_count_delete; "
        "DROP TABLE eval_counts; DROP TABLE scheduler_snapshot; "
        "DROP TABLE eval_claims; DROP TABLE eval_results; "
        "DROP TABLE eval_result_chunks; "
        "DROP TABLE step_log_chunks; DROP TABLE step_logs; "
        "ALTER TABLE steps DROP COLUMN peak_memory; "
        "ALTER TABLE steps DROP COLUMN cpu_time_us; "
        "ALTER TABLE steps DROP COLUMN build_dir_bytes; "
        "DROP TABLE cache_pins; "
        "DROP TABLE aggregate_constituents; DROP TABLE channel_advances; "
        "DROP TABLE eval_sources; DROP TABLE eval_regressions; "
        "DROP TABLE repeat_checks; DROP TABLE eval_estimates; "
        "ALTER TABLE jobsets DROP COLUMN repeat_ppm; "
        "ALTER TABLE jobsets DROP COLUMN channel_job; "
        "ALTER TABLE jobsets DROP COLUMN max_closure_growth; "
        "ALTER TABLE jobsets DROP COLUMN max_build_time_growth; "
        "DROP TABLE forge_webhooks; "
        "DROP TABLE forge_deliveries; DROP TABLE forge_jobsets; "
        "ALTER TABLE jobsets DROP COLUMN evaluator; "
        "DROP INDEX evaluations_jobset; DROP INDEX eval_errors_eval; "
        "DROP INDEX builds_eval_status; DROP INDEX builds_job; "
        "DROP INDEX builds_stop; DROP INDEX build_outputs_path; "
        "PRAGMA user_version = 1");
  }
  StateDb db(path);
  EXPECT_EQ(db.db().userVersion(), StateDb::schemaVersion());
  EXPECT_EQ(db.build(id)->maxSilentSec, 3600);
  EXPECT_EQ(db.build(id)->timeoutSec, 36000);
}

TEST(JobLimits, AStepRunsWithItsOwnerBuildsLimits) {
  TempDir dir("kiln-limits");
  std::string state = dir.path() + "/state";
  std::string a, c;
  {
    store::LocalStore store(state);
    a = makeDrv(store, "a");
    c = makeDrv(store, "c", {a});
  }
  Job ja, jc;
  ja.attr = "a";
  ja.system = jc.system = "x86_64-linux";
  ja.drvPath = a;
  ja.maxSilentSec = 7;
  ja.timeoutSec = 70;
  jc.attr = "c";
  jc.drvPath = c;
  auto cfg = testing::testConfig(state);
  cfg.evalRunner =
      std::make_shared<testing::FixedRunner>(std::vector<Job>{ja, jc});
  cfg.inputFetcher = std::make_shared<testing::FixedFetcher>();
  SchedulerService svc(cfg);
  svc.applyRequest("project-create", {{"name", "p"}});
  auto js = svc.applyRequest("jobset-create", {{"project", "p"},
                                               {"name", "j"},
                                               {"location", "/nowhere"},
                                               {"checkInterval", 0}});
  int64_t eval = svc.evaluateJobset(js["id"].get<int64_t>(), true);
  ASSERT_GT(eval, 0);
  auto builds = svc.db().buildsOfEval(eval);
  ASSERT_EQ(builds.size(), 2u);
  EXPECT_EQ(builds[0].maxSilentSec, 7);
  EXPECT_EQ(builds[1].maxSilentSec, 3600);

  FakeWorker w(svc.endpoint());
  w.hello();
  auto until = [&](const std::function<bool()>& pred) {
    return pumpUntil(svc, {&w}, pred);
  };
  // a is needed by both builds; the lower id (job a) owns it.
  ASSERT_TRUE(until([&] { return w.steps.size() == 1; }));
  EXPECT_EQ(w.steps[0].maxSilentSec, 7u);
  EXPECT_EQ(w.steps[0].timeoutSec, 70u);
  w.uploadOutputs(w.steps[0], "a\n");
  ASSERT_TRUE(until([&] { return w.pendingUploads == 0; }));
  w.result(w.steps[0].stepId, protocol::StepStatus::kSuccess);
  ASSERT_TRUE(until([&] { return w.steps.size() == 2; }));
  EXPECT_EQ(w.steps[1].maxSilentSec, 3600u);
  EXPECT_EQ(w.steps[1].timeoutSec, 36000u);
}

}  // namespace
}  // namespace kiln::scheduler
