// `kiln db migrate|version|copy` on a real PostgreSQL server (issue 31):
// a fresh database gets the schema, a SQLite state directory made by the
// CLI moves into PostgreSQL and back, and each mistake (missing source,
// non-empty target, a password in the URL, an unreachable server) is one
// clear line, a non-zero exit and nothing changed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "kiln/common/file.h"
#include "kiln/scheduler/state_db.h"
#include "postgres_server.h"
#include "test_support.h"

namespace kiln {
namespace {

using scheduler::DatabaseSpec;
using scheduler::StateDb;
using ::testing::HasSubstr;
using ::testing::Not;

class DbCommandTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!test::PostgresServer::available()) return;
    pg_ = new test::PostgresServer();
    setenv("PGPASSFILE", pg_->passFile().c_str(), 1);
  }
  static void TearDownTestSuite() {
    delete pg_;
    pg_ = nullptr;
  }
  void SetUp() override { KILN_SKIP_UNLESS_POSTGRES(); }

  test::RunResult kiln(std::vector<std::string> args) {
    args.insert(args.begin(), test::kilnBinary());
    return test::run(args);
  }

  // A SQLite state directory made by the CLI (a project, a jobset, a
  // token) plus an evaluation with builds (only a scheduler makes those).
  std::string farmDir() {
    std::string dir = dir_.path() + "/farm";
    createDirs(dir);
    for (auto args : std::vector<std::vector<std::string>>{
             {"project", "create", "demo", "--description", "a demo"},
             {"jobset", "create", "--project", "demo", "main", "--location",
              "/src"},
             {"token", "create", "--scope", "read", "--name", "ci"}}) {
      args.insert(args.end(), {"--state-dir", dir});
      auto r = kiln(args);
      EXPECT_EQ(r.exitCode, 0) << r.err;
    }
    StateDb db(dir + "/scheduler.sqlite");
    scheduler::EvaluationRow e;
    e.jobset = db.jobsetByName("demo", "main")->id;
    scheduler::BuildRow b;
    b.eval = db.createEvaluation(e, {{"broken", "error: boom"}});
    b.jobset = e.jobset;
    for (auto job : {"a", "b", "c"}) {
      b.job = job;
      b.drvPath = "/nix/store/" + std::string(32, 'a') + "-" + job + ".drv";
      db.finishBuild(db.createBuild(b), 0, 5, "");
    }
    return dir;
  }

  // The rows of `table` in the PostgreSQL database `url` ("" on failure).
  std::string count(const std::string& url, const std::string& table) {
    auto r = pg_->psql("SELECT count(*) FROM " + table, url);
    return r.exitCode == 0 ? r.out : "";
  }

  // Expects a one-line error containing `text` and exit code `code`.
  static void expectError(const test::RunResult& r, int code,
                          const std::string& text) {
    EXPECT_EQ(r.exitCode, code) << r.err;
    EXPECT_THAT(r.err, HasSubstr(text));
    EXPECT_EQ(test::nonEmptyLines(r.err).size(), 1u) << r.err;
  }

  TempDir dir_{"kiln-db-command"};
  static test::PostgresServer* pg_;
};

test::PostgresServer* DbCommandTest::pg_ = nullptr;

TEST_F(DbCommandTest, MigrateAndVersionOnAFreshDatabase) {
  std::string url = pg_->createDatabase("fresh");
  auto r = kiln({"db", "version", "--database", url});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::string supported = std::to_string(StateDb::schemaVersion());
  EXPECT_EQ(r.out, "stored: 0\nsupported: " + supported + "\n");
  EXPECT_THAT(r.err, HasSubstr("kiln db migrate"));

  r = kiln({"db", "migrate", "--database", url});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("schema version 0 → " + supported));
  r = kiln({"db", "migrate", "--database", url});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("already at version " + supported));
  r = kiln({"db", "version", "--database", url});
  EXPECT_EQ(r.out, "stored: " + supported + "\nsupported: " + supported + "\n");
  EXPECT_EQ(count(url, "projects"), "0\n");

  r = kiln({"db", "version"});
  EXPECT_EQ(r.out, "supported: " + supported + "\n");
}

TEST_F(DbCommandTest, CopiesAStateDirectoryIntoPostgresAndBack) {
  std::string from = farmDir();
  std::string url = pg_->createDatabase("copied");
  auto r = kiln({"db", "copy", "--from", from, "--to", url});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("builds: 3 rows"));
  EXPECT_THAT(r.out, HasSubstr("copied "));
  EXPECT_EQ(count(url, "builds"), "3\n");
  EXPECT_EQ(pg_->psql("SELECT name, description FROM projects", url).out,
            "demo|a demo\n");
  // The copy is a farm of its own: the CLI works on it, new ids are fresh.
  r = kiln({"project", "create", "second", "--database", url});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"id\":2"));
  EXPECT_THAT(kiln({"db", "version", "--database", url}).out,
              HasSubstr("stored: " +
                        std::to_string(StateDb::schemaVersion()) + "\n"));

  std::string back = dir_.path() + "/back";
  r = kiln({"db", "copy", "--from-database", url, "--to-state-dir", back});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  StateDb db(DatabaseSpec::inStateDir(back), StateDb::ReadOnly{});
  EXPECT_EQ(db.buildCounts(0).all, 3);
  EXPECT_EQ(db.evaluationErrors(1).at(0).error, "error: boom");
  EXPECT_TRUE(db.projectByName("second"));
}

TEST_F(DbCommandTest, RefusesANonEmptyTargetAndChangesNothing) {
  std::string from = farmDir();
  std::string url = pg_->createDatabase("busy");
  ASSERT_EQ(kiln({"project", "create", "mine", "--database", url}).exitCode, 0);
  auto r = kiln({"db", "copy", "--from", from, "--to", url});
  expectError(r, 1, "table projects has rows");
  EXPECT_EQ(pg_->psql("SELECT name FROM projects", url).out, "mine\n");
  EXPECT_EQ(count(url, "builds"), "0\n");
}

TEST_F(DbCommandTest, BadInputIsOneClearLineAndChangesNothing) {
  std::string url = pg_->createDatabase("untouched");
  std::string missing = dir_.path() + "/none";
  auto r = kiln({"db", "copy", "--from", missing, "--to", url});
  expectError(r, 4, "no state database at " + missing);
  EXPECT_EQ(count(url, "projects"), "");  // still no schema at all

  std::string from = farmDir();
  std::string withPassword =
      "postgresql://kiln:secret@127.0.0.1:" + std::to_string(pg_->port()) +
      "/untouched";
  r = kiln({"db", "copy", "--from", from, "--to", withPassword});
  expectError(r, 2, "holds a password");
  EXPECT_THAT(r.err, Not(HasSubstr("secret")));

  std::string away = "postgresql://kiln@127.0.0.1:" +
                     std::to_string(test::freeLoopbackPort()) + "/x";
  r = kiln({"db", "copy", "--from", from, "--to", away});
  expectError(r, 1, "cannot connect");
  std::string back = dir_.path() + "/never";
  r = kiln({"db", "copy", "--from-database", away, "--to-state-dir", back});
  expectError(r, 1, "cannot connect");
  EXPECT_FALSE(pathExists(back));

  r = kiln({"db", "copy", "--from", from, "--to", from});
  expectError(r, 2, "--to-state-dir");
  r = kiln({"db", "migrate", "--state-dir", missing});
  expectError(r, 4, "no state database");
  r = kiln({"db", "migrate", "--database", away});
  expectError(r, 1, "cannot connect");
  EXPECT_EQ(count(url, "projects"), "");
}

}  // namespace
}  // namespace kiln
