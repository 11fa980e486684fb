// StateDb: migrations, validation, cached failures, requests.
#include "kiln/scheduler/state_db.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kiln/common/file.h"
#include "state_backends.h"

namespace kiln::scheduler {
namespace {

// The backend-neutral tests run against SQLite and PostgreSQL alike.
class StateDbTest : public ::testing::TestWithParam<test::StateBackend> {
 protected:
  TempDir dir_{"kiln-statedb"};
  DatabaseSpec spec_ = test::freshStateDatabase(GetParam(), dir_.path());

  /// Creates project "local" and path jobset "a" in it; `j` is left as
  /// that jobset's row (without its id) for more jobsets like it.
  static int64_t addLocalJobset(StateDb& db, JobsetRow& j) {
    j.project = db.createProject({0, "local", "", true});
    j.name = "a";
    j.location = "/src";
    return db.createJobset(j);
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, StateDbTest, test::allStateBackends(),
                         test::stateBackendName);

// SQLite's own: WAL, its migrations from older files.
class SqliteStateDbTest : public ::testing::Test {
 protected:
  TempDir dir_{"kiln-statedb"};
  std::string path_ = dir_.path() + "/scheduler.sqlite";
};

TEST_F(SqliteStateDbTest, MigratesToTheLatestVersionOnceAndInWal) {
  { StateDb db(path_); }
  StateDb db(path_);
  EXPECT_EQ(db.db().userVersion(), StateDb::schemaVersion());
  auto s = db.db().prepare("PRAGMA journal_mode");
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.getStr(0), "wal");
}

TEST_P(StateDbTest, RefusesADatabaseFromANewerKiln) {
  {
    StateDb db(spec_);
    EXPECT_EQ(db.db().userVersion(), StateDb::schemaVersion());
    db.db().setUserVersion(999);
  }
  EXPECT_THROW(StateDb db(spec_), SchemaError);
  EXPECT_THROW(StateDb::migrate(spec_), SchemaError);
  try {
    StateDb db(spec_, StateDb::ReadOnly{});
    FAIL() << "a newer schema was read";
  } catch (const SchemaError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("999"));
  }
}

TEST_P(StateDbTest, ProjectsAndJobsetsAreValidated) {
  StateDb db(spec_);
  int64_t p = db.createProject({0, "nixpkgs", "the packages", true});
  EXPECT_THROW(db.createProject({0, "nixpkgs", "", true}), SchedulerStateError);
  EXPECT_THROW(db.createProject({0, "bad name", "", true}),
               SchedulerStateError);
  JobsetRow j;
  j.project = p;
  j.name = "trunk";
  j.location = "/src";
  j.shares = 50;
  int64_t id = db.createJobset(j);
  EXPECT_THROW(db.createJobset(j), SchedulerStateError);
  j.name = "other";
  j.kind = "svn";
  EXPECT_THROW(db.createJobset(j), SchedulerStateError);
  j.kind = "git";
  j.shares = 0;
  EXPECT_THROW(db.createJobset(j), SchedulerStateError);
  j.shares = 1;
  j.evaluator = "gu ile";  // not a plugin name; whether one is loaded is
  EXPECT_THROW(db.createJobset(j), SchedulerStateError);  // the service's
  j.evaluator = "nix";
  EXPECT_EQ(db.jobset(db.createJobset(j))->evaluator, "nix");
  auto got = db.jobsetByName("nixpkgs", "trunk");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->id, id);
  EXPECT_EQ(got->shares, 50);
  EXPECT_EQ(got->file, "default.nix");
  EXPECT_EQ(got->evaluator, "builtin");
  db.setJobsetChecked(id, 1234, std::string("sha256:abc"));
  EXPECT_EQ(db.jobset(id)->lastInputs, "sha256:abc");
  EXPECT_EQ(db.jobset(id)->lastCheckedMs, 1234);
}

TEST_P(StateDbTest, AJobsetsDeclarationIsUpdatedInPlace) {
  StateDb db(spec_);
  JobsetRow j;
  j.project = db.createProject({0, "p", "", true});
  j.name = "trunk";
  j.location = "/src";
  j.id = db.createJobset(j);
  db.setJobsetChecked(j.id, 1234, std::string("sha256:abc"));
  j.kind = "git";
  j.location = "/repo";
  j.branch = "main";
  j.checkIntervalSec = 5;
  j.enabled = false;
  db.updateJobset(j);
  auto got = db.jobset(j.id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->kind, "git");
  EXPECT_EQ(got->location, "/repo");
  EXPECT_EQ(got->branch, "main");
  EXPECT_EQ(got->checkIntervalSec, 5);
  EXPECT_FALSE(got->enabled);
  EXPECT_EQ(got->lastInputs, "sha256:abc");  // its history stays
  j.shares = 0;
  EXPECT_THROW(db.updateJobset(j), SchedulerStateError);
  j.shares = 1;
  j.id = 999;
  EXPECT_THROW(db.updateJobset(j), SchedulerStateError);
}

// Back to schema 6: the jobsets table with migration 4's CHECK on the
// evaluator (rebuilt the way migration 7 rebuilds it, foreign keys deferred
// to the commit, with every row), and without migration 8's eval_counts.
const char* kJobsetsOfSchema6 = R"SQL(
BEGIN;
PRAGMA defer_foreign_keys = ON;
CREATE TEMP TABLE old_jobsets AS SELECT * FROM main.jobsets;
DROP TABLE main.jobsets;
CREATE TABLE main.jobsets (
  id INTEGER PRIMARY KEY,
  project INTEGER NOT NULL REFERENCES projects(id),
  name TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('path', 'git')),
  location TEXT NOT NULL,
  branch TEXT NOT NULL DEFAULT '',
  file TEXT NOT NULL DEFAULT 'default.nix',
  attribute TEXT NOT NULL DEFAULT '',
  arguments TEXT NOT NULL DEFAULT '{}',
  check_interval INTEGER NOT NULL DEFAULT 300,
  shares INTEGER NOT NULL DEFAULT 100 CHECK (shares >= 1),
  enabled INTEGER NOT NULL DEFAULT 1,
  last_checked INTEGER NOT NULL DEFAULT 0,
  last_inputs TEXT NOT NULL DEFAULT '',
  evaluator TEXT NOT NULL DEFAULT 'builtin'
    CHECK (evaluator IN ('builtin', 'nix')),
  UNIQUE (project, name));
INSERT INTO main.jobsets SELECT id, project, name, kind, location, branch,
  file, attribute, arguments, check_interval, shares, enabled, last_checked,
  last_inputs, evaluator FROM temp.old_jobsets;
DROP TABLE temp.old_jobsets;
DROP TRIGGER builds_count_insert;
DROP TRIGGER builds_count_update;
DROP TRIGGER builds_count_delete;
DROP TABLE eval_counts;
DROP TABLE scheduler_snapshot;
DROP TABLE eval_claims;
DROP TABLE eval_results;
DROP TABLE eval_result_chunks;
DROP TABLE step_log_chunks;
DROP TABLE step_logs;
ALTER TABLE steps DROP COLUMN peak_memory;
ALTER TABLE steps DROP COLUMN cpu_time_us;
ALTER TABLE steps DROP COLUMN build_dir_bytes;
DROP TABLE cache_pins;
DROP TABLE aggregate_constituents;
DROP TABLE channel_advances;
DROP TABLE eval_sources;
DROP TABLE eval_regressions;
DROP TABLE forge_webhooks;
DROP TABLE forge_deliveries;
DROP TABLE forge_jobsets;
DROP TABLE repeat_checks;
DROP TABLE eval_estimates;
PRAGMA user_version = 6;
COMMIT;
)SQL";

// Rows of `sql` as "a|b|c" lines.
std::string rowsOf(SqlConnection& db, const std::string& sql) {
  std::string out;
  auto s = db.prepare(sql);
  while (s.step()) {
    for (int c = 0; c < s.columnCount(); c++)
      out += (c ? "|" : "") + (s.isNull(c) ? "NULL" : s.getStr(c));
    out += "\n";
  }
  return out;
}

TEST_F(SqliteStateDbTest,
       MigrationSevenKeepsEveryJobsetAndLetsAnyPluginBeNamed) {
  std::string before, evals, builds;
  int64_t nixJobset = 0;
  {
    StateDb db(path_);
    JobsetRow j;
    j.project = db.createProject({0, "p", "", true});
    j.name = "ours";
    j.location = "/src";
    j.shares = 3;
    db.setJobsetChecked(db.createJobset(j), 1234, std::string("sha256:abc"));
    j.name = "theirs";
    j.kind = "git";
    j.branch = "main";
    j.evaluator = "nix";
    j.enabled = false;
    nixJobset = db.createJobset(j);
    EvaluationRow e;
    e.jobset = nixJobset;
    e.inputsHash = "git:1";
    BuildRow b;
    b.eval = db.createEvaluation(e, {});
    b.jobset = nixJobset;
    b.job = "hello";
    b.drvPath = "/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-hello.drv";
    db.createBuild(b);
    db.db().exec(kJobsetsOfSchema6);
    EXPECT_THROW(db.db().exec("UPDATE jobsets SET evaluator = 'other'"),
                 SqlError);  // schema 6 refuses any other name
    before = rowsOf(db.db(), "SELECT * FROM jobsets ORDER BY id");
    evals = rowsOf(db.db(), "SELECT * FROM evaluations ORDER BY id");
    builds = rowsOf(db.db(), "SELECT * FROM builds ORDER BY id");
  }
  StateDb db(path_);
  EXPECT_EQ(db.db().userVersion(), StateDb::schemaVersion());
  // Schema 6's columns are kept; migration 15's channel_job has its
  // default.
  EXPECT_EQ(rowsOf(db.db(),
                   "SELECT id, project, name, kind, location, branch, file, "
                   "attribute, arguments, check_interval, shares, enabled, "
                   "last_checked, last_inputs, evaluator FROM jobsets ORDER BY "
                   "id"),
            before);
  EXPECT_EQ(rowsOf(db.db(), "SELECT DISTINCT channel_job FROM jobsets"),
            "tested\n");
  EXPECT_THAT(before, ::testing::HasSubstr("|sha256:abc|builtin"));
  EXPECT_EQ(rowsOf(db.db(), "SELECT * FROM evaluations ORDER BY id"), evals);
  EXPECT_EQ(rowsOf(db.db(), "SELECT * FROM builds ORDER BY id"), builds);
  EXPECT_EQ(rowsOf(db.db(), "PRAGMA foreign_key_check"), "");
  EXPECT_EQ(rowsOf(db.db(), "PRAGMA integrity_check"), "ok\n");
  EXPECT_EQ(rowsOf(db.db(), "SELECT name FROM sqlite_temp_master"), "");
  // The rebuilt table still refers to projects and is referred to.
  EXPECT_THROW(db.db().exec("UPDATE jobsets SET project = 99"), SqlError);
  EXPECT_THROW(db.db().exec("DELETE FROM jobsets"), SqlError);
  auto j = *db.jobset(nixJobset);
  j.evaluator = "test-evaluator";
  db.updateJobset(j);
  EXPECT_EQ(db.jobset(nixJobset)->evaluator, "test-evaluator");
  EXPECT_EQ(db.jobsetByName("p", "theirs")->branch, "main");
}

TEST_P(StateDbTest, CachedFailuresExpireAndClear) {
  StateDb db(spec_);
  db.addCachedFailure({"/nix/store/a.drv", 1, 100, 0});
  db.addCachedFailure({"/nix/store/b.drv", 7, 100, 500});
  EXPECT_TRUE(db.cachedFailure("/nix/store/a.drv", 10000));
  EXPECT_TRUE(db.cachedFailure("/nix/store/b.drv", 499));
  EXPECT_FALSE(db.cachedFailure("/nix/store/b.drv", 500));
  EXPECT_EQ(db.clearCachedFailures("/nix/store/a.drv"), 1);
  EXPECT_FALSE(db.cachedFailure("/nix/store/a.drv", 0));
  EXPECT_EQ(db.clearCachedFailures(""), 1);
  EXPECT_TRUE(db.cachedFailures().empty());
}

TEST_P(StateDbTest, StepsAreSharedByDerivationAndReopenable) {
  StateDb db(spec_);
  StepRow s;
  s.drvPath = "/nix/store/x.drv";
  s.system = "x86_64-linux";
  s.features = {"kvm", "big"};
  int64_t a = db.upsertStep(s);
  EXPECT_EQ(db.upsertStep(s), a);
  EXPECT_EQ(db.step(a)->features, (std::vector<std::string>{"kvm", "big"}));
  db.startStep(a, "w1", 10);
  db.finishStep(a, 1, 20, "boom");
  EXPECT_TRUE(db.unfinishedSteps().empty());
  EXPECT_EQ(db.step(a)->attempts, 1);
  db.reopenStep(a);
  ASSERT_EQ(db.unfinishedSteps().size(), 1u);
}

TEST_P(StateDbTest, StepUsageIsRecorded) {
  StateDb db(spec_);
  StepRow s;
  s.drvPath = "/nix/store/m.drv";
  s.system = "x86_64-linux";
  int64_t a = db.upsertStep(s);
  EXPECT_EQ(db.step(a)->peakMemoryBytes, 0);  // not measured
  db.setStepUsage(a, int64_t{5} << 30, 12345678, 4096);
  db.finishStep(a, 13, 20, "build ran out of memory");
  auto r = db.step(a);
  EXPECT_EQ(r->status, 13);
  EXPECT_EQ(r->peakMemoryBytes, int64_t{5} << 30);
  EXPECT_EQ(r->cpuTimeUs, 12345678);
  EXPECT_EQ(r->buildDirBytes, 4096);
}

TEST_P(StateDbTest, LastPeaksAreEachPackagesLatestMeasuredOne) {
  StateDb db(spec_);
  auto add = [&](const std::string& name, const std::string& pname,
                 int64_t peak) {
    StepRow s;
    s.drvPath = "/nix/store/" + name + ".drv";
    s.system = "x86_64-linux";
    s.pname = pname;
    int64_t id = db.upsertStep(s);
    if (peak) db.setStepUsage(id, peak, 1, 1);
    db.finishStep(id, 0, 20, "");
  };
  add("a1", "chromium", 6 << 20);
  add("a2", "chromium", 4 << 20);  // the latest wins, not the largest
  add("a3", "chromium", 0);        // not measured: ignored
  add("b1", "hello", 1 << 20);
  add("c1", "", 9 << 20);  // no package name: nothing to place by
  auto peaks = db.lastPeaks();
  std::sort(peaks.begin(), peaks.end());
  EXPECT_EQ(peaks, (std::vector<std::pair<std::string, uint64_t>>{
                       {"chromium", 4 << 20}, {"hello", 1 << 20}}));
}

TEST_P(StateDbTest, BuildCountsInRangeCountOneJobsetsRun) {
  StateDb db(spec_);
  JobsetRow j;
  int64_t a = addLocalJobset(db, j);
  j.name = "b";
  int64_t b = db.createJobset(j);
  auto add = [&](int64_t jobset, const std::string& drv) {
    EvaluationRow e;
    e.jobset = jobset;
    BuildRow r;
    r.eval = db.createEvaluation(e, {});
    r.jobset = jobset;
    r.job = "job";
    r.drvPath = drv;
    return db.createBuild(r);
  };
  int64_t old = add(a, "/nix/store/o.drv");
  int64_t first = add(a, "/nix/store/x.drv");
  add(b, "/nix/store/other.drv");  // in the range, another jobset
  int64_t mid = add(a, "/nix/store/y.drv");
  int64_t last = add(a, "/nix/store/z.drv");
  db.finishBuild(old, 0, 1, "");
  db.finishBuild(first, 0, 1, "");
  db.finishBuild(mid, 1, 1, "");
  auto c = db.buildCountsInRange(a, first, last);
  EXPECT_EQ(c.all, 3);
  EXPECT_EQ(c.finished, 2);
  EXPECT_EQ(c.succeeded, 1);
}

// An evaluation's counts (kept by triggers, migration 8) follow builds
// being created, finished, restarted and finished again, and match a count
// of the builds table itself.
TEST_P(StateDbTest, EvaluationCountsFollowTheBuilds) {
  StateDb db(spec_);
  JobsetRow j;
  int64_t js = addLocalJobset(db, j);
  EvaluationRow e;
  e.jobset = js;
  int64_t ev = db.createEvaluation(e, {});
  int64_t other = db.createEvaluation(e, {});
  std::vector<int64_t> ids;
  for (int i = 0; i < 4; ++i) {
    BuildRow r;
    r.eval = i < 3 ? ev : other;
    r.jobset = js;
    r.job = "job" + std::to_string(i);
    r.drvPath = "/nix/store/d" + std::to_string(i) + ".drv";
    ids.push_back(db.createBuild(r));
  }
  auto counts = [&](int64_t eval) {
    auto c = db.buildCounts(eval);
    return std::vector<int64_t>{c.all, c.finished, c.succeeded};
  };
  auto counted = [&](int64_t eval) {
    auto s = db.db().prepare(
        "SELECT count(*), coalesce(sum(finished), 0), "
        "coalesce(sum(CASE WHEN finished = 1 AND status = 0 THEN 1 ELSE 0 "
        "END), "
        "0) FROM builds WHERE eval = ?");
    s.bind(eval);
    EXPECT_TRUE(s.step());
    return std::vector<int64_t>{s.getInt(0), s.getInt(1), s.getInt(2)};
  };
  EXPECT_EQ(counts(ev), (std::vector<int64_t>{3, 0, 0}));
  db.finishBuild(ids[0], 0, 1, "");
  db.finishBuild(ids[1], 1, 1, "");
  EXPECT_EQ(counts(ev), (std::vector<int64_t>{3, 2, 1}));
  db.reopenBuild(ids[1]);
  EXPECT_EQ(counts(ev), (std::vector<int64_t>{3, 1, 1}));
  db.finishBuild(ids[1], 0, 2, "");
  db.finishBuild(ids[3], 0, 2, "");
  EXPECT_EQ(counts(ev), (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(counts(ev), counted(ev));
  EXPECT_EQ(counts(other), counted(other));
  EXPECT_EQ(counts(0), (std::vector<int64_t>{4, 3, 3}));
}

// An evaluation's builds inserted a few hundred per statement get their
// ids in order and are counted (migration 10's statement-level trigger on
// PostgreSQL); the latest finished build of each derivation is found in
// bulk as finishedBuildOfDrv finds it alone.
TEST_P(StateDbTest, BuildsAreCreatedAndLookedUpInBulk) {
  StateDb db(spec_);
  JobsetRow j;
  BuildRow r;
  r.jobset = addLocalJobset(db, j);
  r.eval = db.createEvaluation({0, r.jobset, "", 0, 0, 0, ""}, {});
  int64_t ev = r.eval;
  std::vector<BuildRow> rows;
  for (int i = 0; i < 300; ++i) {  // chunks of 256, 16, 16, 4, 4, 4
    r.job = "job" + std::to_string(i);
    r.drvPath = "/nix/store/d" + std::to_string(i % 150) + ".drv";
    r.finished = i % 3 == 0;
    r.status = r.finished ? i % 2 : -1;
    rows.push_back(r);
  }
  std::vector<int64_t> ids;
  {
    StateDb::Transaction txn(db);
    ids = db.createBuilds(rows);
    txn.commit();
  }
  ASSERT_EQ(ids.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    auto b = db.build(ids[i]);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->job, rows[i].job);
    EXPECT_EQ(b->finished, rows[i].finished);
  }
  auto c = db.buildCounts(ev);
  EXPECT_EQ(c.all, 300);
  EXPECT_EQ(c.finished, 100);
  EXPECT_EQ(c.succeeded, 50);
  std::vector<std::string> drvs;
  for (int i = 0; i < 160; ++i)  // 10 without any build
    drvs.push_back("/nix/store/d" + std::to_string(i) + ".drv");
  auto found = db.finishedBuildsOfDrvs(drvs);
  for (auto& d : drvs) {
    auto one = db.finishedBuildOfDrv(d);
    auto it = found.find(d);
    ASSERT_EQ(one.has_value(), it != found.end()) << d;
    if (one) {
      EXPECT_EQ(it->second.id, one->id) << d;
    }
  }
  EXPECT_EQ(found.size(), 50u);  // d0, d3, ... d147
}

TEST_P(StateDbTest, RequestsAreQueuedAndCompleted) {
  StateDb db(spec_);
  int64_t r = db.addRequest("queue", "{}");
  ASSERT_EQ(db.pendingRequests().size(), 1u);
  db.completeRequest(r, false, "no");
  EXPECT_TRUE(db.pendingRequests().empty());
  EXPECT_FALSE(db.request(r)->ok);
  EXPECT_EQ(db.request(r)->result, "no");
}

}  // namespace
}  // namespace kiln::scheduler
