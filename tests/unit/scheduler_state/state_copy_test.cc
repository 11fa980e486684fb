// copyState (`kiln db copy`): a whole farm between SQLite and PostgreSQL,
// ids kept, the target's sequences moved past them, and every refusal
// leaving the target as it was.
#include "kiln/scheduler/state_copy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>

#include "kiln/common/file.h"
#include "kiln/scheduler/cache_roots.h"
#include "kiln/scheduler/eval_estimate.h"
#include "kiln/scheduler/log_store.h"
#include "kiln/scheduler/notification_store.h"
#include "kiln/scheduler/release_store.h"
#include "kiln/scheduler/repeat_store.h"
#include "kiln/scheduler/tokens.h"
#include "postgres_server.h"
#include "state_backends.h"

namespace kiln::scheduler {
namespace {

using test::StateBackend;
using ::testing::HasSubstr;

// Every table of the schema (checked against SQLite's catalogue below).
const std::vector<std::string> kTables = {
    "aggregate_constituents",
    "api_tokens",
    "build_outputs",
    "builds",
    "cache_pins",
    "cached_failures",
    "channel_advances",
    "eval_claims",
    "eval_counts",
    "eval_errors",
    "eval_estimates",
    "eval_regressions",
    "eval_result_chunks",
    "eval_results",
    "eval_sources",
    "evaluations",
    "forge_deliveries",
    "forge_jobsets",
    "forge_webhooks",
    "jobsets",
    "notifications",
    "projects",
    "repeat_checks",
    "requests",
    "scheduler_snapshot",
    "step_deps",
    "step_log_chunks",
    "step_logs",
    "steps",
};

// Whether column `col` of `table` holds bytes (read with getBlob: PostgreSQL
// spells BYTEA out in hex as text).
bool isBlob(const std::string& table, int col) {
  return (table == "step_logs" || table == "step_log_chunks") && col == 3;
}

// Each table's rows as text (NULL spelled out), sorted: equal dumps mean
// equal tables whatever the backend.
using Dump = std::map<std::string, std::vector<std::string>>;

Dump dumpOf(const DatabaseSpec& spec) {
  auto db = spec.connect(SqlAccess::kRead);
  Dump out;
  for (auto& t : kTables) {
    auto s = db->prepare("SELECT * FROM " + t);
    auto& rows = out[t];
    while (s.step()) {
      std::string row;
      for (int c = 0; c < s.columnCount(); ++c)
        row += (s.isNull(c)       ? std::string("<NULL>")
                : isBlob(t, c) ? s.getBlob(c)
                               : s.getStr(c)) +
               "|";
      rows.push_back(row);
    }
    std::sort(rows.begin(), rows.end());
  }
  return out;
}

int64_t maxId(StateDb& db, const std::string& table) {
  auto s = db.db().prepare("SELECT coalesce(max(id), 0) FROM " + table);
  EXPECT_TRUE(s.step());
  return s.getInt(0);
}

std::string drv(const std::string& name) {
  return "/nix/store/" + std::string(32, 'a') + "-" + name + ".drv";
}

// Fills projects to build_outputs through the state layer's APIs, with
// ids that have gaps (a rolled-back project, an explicit id, a deleted
// build) and text that needs care (quotes, `?`, newlines, non-ASCII).
void fillHistory(StateDb& db) {
  int64_t p = db.createProject({0, "nixpkgs", "it's \"the\" set?\n", true});
  {
    StateDb::Transaction rolledBack(db);
    db.createProject({0, "gone", "", true});
  }
  db.createProject({0, "hydra", "Größe ✓", false});
  JobsetRow j;
  j.project = p;
  j.name = "trunk";
  j.location = "/src";
  j.arguments = R"({"system": "\"x86_64-linux\""})";
  j.channelJob = "job2";
  j.repeatPpm = 50000;
  int64_t js = db.createJobset(j);
  db.setJobsetChecked(js, 1234, std::string("sha256:abc"));
  EvaluationRow e;
  e.jobset = js;
  e.inputsHash = "git:1";
  int64_t ev = db.createEvaluation(
      e, {{"broken", "error: ?\nline 2"}, {"broken", "twice"}});
  int64_t empty = db.createEvaluation(e, {});
  // An evaluation's recorded expected finish (migration 17).
  EvalEstimate est;
  est.madeMs = 83;
  est.finishMs = 84;
  recordEvalEstimate(db, ev, est);
  std::vector<int64_t> builds;
  for (int i = 0; i < 5; ++i) {
    BuildRow b;
    b.eval = i < 4 ? ev : empty;
    b.jobset = js;
    b.job = "job" + std::to_string(i);
    b.drvPath = drv("b" + std::to_string(i));
    builds.push_back(db.createBuild(b));
  }
  db.finishBuild(builds[0], 0, 50, "");
  db.finishBuild(builds[1], 1, 60, "failed: 'quoted'");
  db.setBuildOutputs(builds[0], {{"out", "/nix/store/x-out"}, {"dev", "/d"}});
  // Release engineering (migration 15): an aggregate, a channel advance,
  // an evaluation's sources.
  addAggregateConstituents(db, {{builds[2], builds[0]}, {builds[2], builds[1]}});
  db.finishBuild(builds[2], 0, 70, "");
  EXPECT_TRUE(advanceChannel(db, builds[2], 71));
  setEvalSources(db, ev, "/nix/store/" + std::string(32, 's') + "-source");
  recordRegressions(db, ev, {{"job0", "closure", ev, 10, 20}});
  // A gap in the builds' ids, and an eval_counts row with no builds left.
  db.db().exec("DELETE FROM builds WHERE id = " + std::to_string(builds[4]));
  db.db().exec(
      "INSERT INTO builds (id, eval, jobset, job, drv_path, created) VALUES "
      "(1000, " +
      std::to_string(ev) + ", " + std::to_string(js) + ", 'gap', '" +
      drv("gap") + "', 7)");
}

// Fills every table: the history, then the steps, cached failures,
// requests, notifications, tokens and cache pins.
void fillFarm(StateDb& db) {
  fillHistory(db);
  StepRow s;
  s.drvPath = drv("s1");
  s.system = "x86_64-linux";
  s.features = {"kvm", "big-parallel"};
  int64_t s1 = db.upsertStep(s);
  s.drvPath = drv("s2");
  int64_t s2 = db.upsertStep(s);
  db.addStepDep(s1, s2);
  db.startStep(s2, "worker-1", 70);
  db.setStepUsage(s2, 100 << 20, 2500, 8192);
  db.finishStep(s2, 0, 80, "");
  // Reproducibility checks (migration 17): a step found not deterministic.
  addRepeatCheck(db, s2, db.jobsets().front().id, "worker-1", 81);
  startRepeatCheck(db, s2, "worker-2");
  setRepeatCheckRefusedBy(db, s2, {"worker-3", "worker 4"});  // migration 18
  finishRepeatCheck(db, s2, true, {false, {"out"}}, "/side/s2", 82);
  setRepeatReport(db, s2, "--- a\n+++ b\n");
  db.addCachedFailure({drv("cf"), 1, 90, 0});
  int64_t r = db.addRequest("build-cancel", R"({"build": 1})");
  db.completeRequest(r, true, "{}");
  db.addRequest("jobset-eval", "{}");
  NotificationStore notes(db);
  int64_t n = notes.add("webhook", "k", "build.finished", "{\"a\": 1}", 5);
  notes.markDelivered(n, 6);
  notes.add("mail", "k2", "eval.done", "{}", 7);
  // Logs: a finished one (compressed) and a running one's pieces, bytes
  // that are not UTF-8 included.
  storeFinishedLog(db, s2, 1, compressLog("built\n\xff\x00ok\n"));
  appendLogChunks(db, {{s1, 1, 0, std::string("a\xfe\0", 3)},
                       {s1, 1, 3, "b\n"}});
  TokenStore tokens(db);
  TokenRow t;
  t.keyId = "0123456789abcdef";
  t.salt = "salt";
  t.hash = "hash";
  t.scope = TokenScope::kAdmin;
  tokens.revoke(tokens.add(t), 99);
  CachePinStore(db).add("release", "/nix/store/" + std::string(32, 'p') + "-r",
                        100);
}

// Adds a row to each table with an id; each must get a fresh id.
void expectFreshIds(StateDb& db) {
  std::map<std::string, int64_t> before;
  for (auto t : {"projects", "builds", "steps", "requests", "notifications",
                 "api_tokens", "evaluations", "jobsets"})
    before[t] = maxId(db, t);
  int64_t p = db.createProject({0, "after", "", true});
  EXPECT_GT(p, before["projects"]);
  JobsetRow j;
  j.project = p;
  j.name = "j";
  j.location = "/x";
  EXPECT_GT(db.createJobset(j), before["jobsets"]);
  EvaluationRow e;
  e.jobset = db.jobsetByName("nixpkgs", "trunk")->id;
  BuildRow b;
  b.eval = db.createEvaluation(e, {});
  EXPECT_GT(b.eval, before["evaluations"]);
  b.jobset = e.jobset;
  b.job = "new";
  b.drvPath = drv("new");
  EXPECT_GT(db.createBuild(b), before["builds"]);
  StepRow s;
  s.drvPath = drv("new-step");
  EXPECT_GT(db.upsertStep(s), before["steps"]);
  EXPECT_GT(db.addRequest("x", "{}"), before["requests"]);
  NotificationStore notes(db);
  EXPECT_GT(notes.add("t", "k", "e", "{}", 1), before["notifications"]);
  TokenRow t;
  t.keyId = "fedcba9876543210";
  t.salt = t.hash = "s";
  EXPECT_GT(TokenStore(db).add(t), before["api_tokens"]);
}

// (source backend, target backend)
using Pair = std::tuple<StateBackend, StateBackend>;

class StateCopyTest : public ::testing::TestWithParam<Pair> {
 protected:
  TempDir dir_{"kiln-state-copy"};
  DatabaseSpec from_ =
      test::freshStateDatabase(std::get<0>(GetParam()), dir_.path() + "/from");
  DatabaseSpec to_ =
      test::freshStateDatabase(std::get<1>(GetParam()), dir_.path() + "/to");
  void SetUp() override {
    createDirs(dir_.path() + "/from");
    createDirs(dir_.path() + "/to");
  }

  // Expects the copy to throw E saying `text` and to leave the new target
  // as it was: no schema (PostgreSQL), no file (SQLite).
  template <class E>
  void expectRefused(const std::string& text) {
    try {
      copyState(from_, to_);
      ADD_FAILURE() << "copied";
    } catch (const E& e) {
      EXPECT_THAT(e.what(), HasSubstr(text));
    }
    if (to_.isPostgres())
      EXPECT_EQ(StateDb::storedVersion(to_), 0);
    else
      EXPECT_FALSE(pathExists(to_.sqlitePath));
  }
};

std::string pairName(const ::testing::TestParamInfo<Pair>& info) {
  auto name = [](StateBackend b) {
    return b == StateBackend::kSqlite ? "Sqlite" : "Postgres";
  };
  return std::string(name(std::get<0>(info.param))) + "To" +
         name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Backends, StateCopyTest,
                         ::testing::Combine(test::allStateBackends(),
                                            test::allStateBackends()),
                         pairName);

TEST_P(StateCopyTest, CopiesEveryRowWithItsIdAndNewRowsGetFreshIds) {
  {
    StateDb db(from_);
    fillFarm(db);
  }
  std::map<std::string, int64_t> progress;
  auto report = copyState(
      from_, to_, [&](const std::string& t, int64_t n) { progress[t] = n; });
  Dump source = dumpOf(from_);
  EXPECT_EQ(dumpOf(to_), source);
  ASSERT_EQ(report.tables.size(), kTables.size());
  int64_t sum = 0;
  for (auto& [table, rows] : report.tables) {
    EXPECT_EQ(rows, static_cast<int64_t>(source[table].size())) << table;
    EXPECT_EQ(progress[table], rows) << table;
    sum += rows;
  }
  EXPECT_EQ(report.rows, sum);
  EXPECT_EQ(report.tables.front().first, "projects");
  EXPECT_EQ(source["builds"].size(), 5u);  // ids 1-4 and 1000
  StateDb to(to_, StateDb::Existing{});
  EXPECT_EQ(to.build(1000)->job, "gap");
  EXPECT_EQ(to.buildCounts(0).all, 5);
  expectFreshIds(to);
}

TEST_P(StateCopyTest, RefusesATargetWithRowsAndLeavesItUnchanged) {
  {
    StateDb db(from_);
    fillFarm(db);
  }
  {
    StateDb db(to_);
    TokenRow t;
    t.keyId = "0123456789abcdef";
    t.salt = t.hash = "x";
    TokenStore(db).add(t);
  }
  Dump before = dumpOf(to_);
  try {
    copyState(from_, to_);
    FAIL() << "copied into a database with rows";
  } catch (const SchedulerStateError& e) {
    EXPECT_THAT(e.what(), HasSubstr("api_tokens"));
    EXPECT_THAT(e.what(), HasSubstr("not empty"));
  }
  EXPECT_EQ(dumpOf(to_), before);
}

TEST_P(StateCopyTest, RefusesASourceAtAnOlderSchema) {
  {
    StateDb db(from_);
    db.db().setUserVersion(StateDb::schemaVersion() - 1);
  }
  expectRefused<SchemaError>("kiln db migrate");
}

TEST_P(StateCopyTest, AFailureAtTheLastTableLeavesTheTargetAsItWas) {
  {
    StateDb db(from_);
    fillFarm(db);
    // A row of the last table for an evaluation that does not exist,
    // slipped past the source's foreign keys: the target refuses it.
    bool pg = db.dialect() == SqlDialect::kPostgres;
    db.db().exec(pg ? "SET session_replication_role = replica"
                    : "PRAGMA foreign_keys = OFF");
    db.db().exec("INSERT INTO eval_counts (eval, builds) VALUES (999999, 1)");
    db.db().exec(pg ? "SET session_replication_role = origin"
                    : "PRAGMA foreign_keys = ON");
  }
  expectRefused<SqlError>("copying table eval_counts");
}

TEST(StateCopyRefusalTest, MissingSourceOrTheSameDatabase) {
  TempDir dir("kiln-state-copy");
  auto from = DatabaseSpec::inStateDir(dir.path() + "/none");
  auto to = DatabaseSpec::inStateDir(dir.path());
  EXPECT_THROW(copyState(from, to), SchedulerStateError);
  EXPECT_FALSE(pathExists(to.sqlitePath));
  { StateDb db(to.sqlitePath); }
  try {
    copyState(to, DatabaseSpec::inStateDir(dir.path() + "/."));
    FAIL() << "copied a database onto itself";
  } catch (const SchedulerStateError& e) {
    EXPECT_THAT(e.what(), HasSubstr("same database"));
  }
}

TEST(StateCopyRefusalTest, TextPostgresCannotStoreFailsNamingTheTable) {
  KILN_SKIP_UNLESS_POSTGRES();
  TempDir dir("kiln-state-copy");
  auto from = DatabaseSpec::inStateDir(dir.path());
  auto to = test::freshStateDatabase(StateBackend::kPostgres, dir.path());
  {
    StateDb db(from);
    fillFarm(db);
    db.db().exec("UPDATE builds SET error = CAST(X'ff41' AS TEXT)");
  }
  try {
    copyState(from, to);
    FAIL() << "copied text that is not UTF-8";
  } catch (const SchedulerStateError& e) {
    EXPECT_THAT(e.what(), HasSubstr("copying table builds"));
    EXPECT_THAT(e.what(), HasSubstr("UTF-8"));
  }
  EXPECT_EQ(StateDb::storedVersion(to), 0);
}

// A farm of KILN_COPY_BENCH_BUILDS builds (e.g. 200000; skipped without
// it) in 1,000-build evaluations, each build with a step, an output and
// two step dependencies, copied from SQLite to PostgreSQL: prints rows/s.
void generateFarm(StateDb& db, int64_t builds) {
  StateDb::Transaction txn(db);
  JobsetRow j;
  j.project = db.createProject({0, "bench", "", true});
  j.name = "trunk";
  j.location = "/src";
  int64_t js = db.createJobset(j);
  auto build = db.db().prepare(
      "INSERT INTO builds (id, eval, jobset, job, nix_name, system, "
      "drv_path, finished, status, created, stop_time) VALUES "
      "(?, ?, ?, ?, ?, 'x86_64-linux', ?, 1, 0, 1, 2)");
  auto step = db.db().prepare(
      "INSERT INTO steps (id, drv_path, system, pname, finished, status, "
      "created, start_time, stop_time, worker) VALUES "
      "(?, ?, 'x86_64-linux', ?, 1, 0, 1, 2, 3, 'worker-1')");
  auto output = db.db().prepare(
      "INSERT INTO build_outputs (build, name, path) VALUES (?, 'out', ?)");
  auto dep = db.db().prepare("INSERT INTO step_deps (step, dep) VALUES (?, ?)");
  EvaluationRow e;
  e.jobset = js;
  e.inputsHash = "git:x";
  int64_t eval = 0;
  for (int64_t id = 1; id <= builds; ++id) {
    if (id % 1000 == 1) eval = db.createEvaluation(e, {});
    std::string name = "pkg-" + std::to_string(id);
    std::string path = "/nix/store/" + std::string(32, 'b') + "-" + name;
    build.bind(id).bind(eval).bind(js).bind("pkgs." + name).bind(name);
    build.bind(path + ".drv").exec();
    step.bind(id).bind(path + ".drv").bind(name).exec();
    output.bind(id).bind(path).exec();
    for (int64_t d : {id - 1, id / 3})
      if (d > 0) dep.bind(id).bind(d).exec();
  }
  txn.commit();
}

TEST(StateCopyBench, SqliteToPostgresRowsPerSecond) {
  const char* env = std::getenv("KILN_COPY_BENCH_BUILDS");
  if (!env) GTEST_SKIP() << "set KILN_COPY_BENCH_BUILDS=200000 to measure";
  KILN_SKIP_UNLESS_POSTGRES();
  TempDir dir("kiln-state-copy");
  auto from = DatabaseSpec::inStateDir(dir.path());
  auto to = test::freshStateDatabase(StateBackend::kPostgres, dir.path());
  {
    StateDb db(from);
    generateFarm(db, std::atoll(env));
  }
  auto last = std::chrono::steady_clock::now();
  auto report = copyState(from, to, [&](const std::string& t, int64_t n) {
    auto now = std::chrono::steady_clock::now();
    std::cout << t << ": " << n << " rows after "
              << std::chrono::duration<double>(now - last).count() << " s\n";
  });
  std::cout << report.rows << " rows in " << report.seconds
            << " s: " << static_cast<int64_t>(report.rows / report.seconds)
            << " rows/s\n";
  EXPECT_EQ(StateDb(to, StateDb::Existing{}).buildCounts(0).all,
            std::atoll(env));
}

// The copy's table list is the schema's.
TEST(StateCopyRefusalTest, EveryTableOfTheSchemaIsCopied) {
  TempDir dir("kiln-state-copy");
  StateDb db(dir.path() + "/scheduler.sqlite");
  auto s = db.db().prepare(
      "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  std::vector<std::string> names;
  while (s.step()) names.push_back(s.getStr(0));
  EXPECT_EQ(names, kTables);
}

}  // namespace
}  // namespace kiln::scheduler
