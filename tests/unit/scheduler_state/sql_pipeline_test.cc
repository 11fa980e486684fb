// Transactions whose writes PostgreSQL pipelines (sql_postgres.cc): what a
// caller sees is what it saw before (SQLite runs the same tests): reads
// see the transaction's earlier writes, changes() counts the last one, a
// failing write is reported by its savepoint's or transaction's commit at
// the latest, and undoing a savepoint keeps the rest.
#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "kiln/scheduler/state_db.h"
#include "state_backends.h"

namespace kiln::scheduler {
namespace {

class SqlPipelineTest : public ::testing::TestWithParam<test::StateBackend> {
 protected:
  void SetUp() override {
    db_.db().exec(
        "CREATE TABLE pipeline_t (k INTEGER PRIMARY KEY, v INTEGER NOT NULL)");
  }
  void insert(int64_t k, int64_t v) {
    db_.db()
        .prepare("INSERT INTO pipeline_t (k, v) VALUES (?, ?)")
        .bind(k)
        .bind(v)
        .exec();
  }
  int64_t count() {
    auto s = db_.db().prepare("SELECT count(*) FROM pipeline_t");
    return s.step() ? s.getInt(0) : -1;
  }

  TempDir dir_{"kiln-pipeline"};
  StateDb db_{test::freshStateDatabase(GetParam(), dir_.path())};
};

INSTANTIATE_TEST_SUITE_P(Backends, SqlPipelineTest, test::allStateBackends(),
                         test::stateBackendName);

TEST_P(SqlPipelineTest, ReadsSeeEarlierWritesAndChangesCountTheLast) {
  StateDb::Transaction txn(db_);
  for (int k = 0; k < 300; k++) insert(k, k);  // more than one batch
  EXPECT_EQ(count(), 300);
  db_.db()
      .prepare("UPDATE pipeline_t SET v = v + 1 WHERE k < ?")
      .bind(7)
      .exec();
  EXPECT_EQ(db_.db().changes(), 7);
  txn.commit();
  EXPECT_EQ(count(), 300);
}

TEST_P(SqlPipelineTest, AFailedWriteFailsItsTransactionByTheCommit) {
  insert(1, 1);
  EXPECT_THROW(
      {
        StateDb::Transaction txn(db_);
        insert(2, 2);
        insert(1, 3);  // the key is taken
        insert(4, 4);
        // First used here: the server skips its preparation too.
        db_.db()
            .prepare("UPDATE pipeline_t SET v = 9 WHERE k = ?")
            .bind(1)
            .exec();
        txn.commit();
      },
      SqlError);
  EXPECT_EQ(count(), 1);
  insert(5, 5);  // the connection is usable again
  EXPECT_EQ(count(), 2);
  db_.db().prepare("UPDATE pipeline_t SET v = 9 WHERE k = ?").bind(1).exec();
  EXPECT_EQ(db_.db().changes(), 1);
}

TEST_P(SqlPipelineTest, AFailedSavepointIsUndoneAloneByItsCommit) {
  StateDb::Transaction txn(db_);
  insert(1, 1);
  bool failed = false;
  try {
    StateDb::Transaction inner(db_);
    insert(2, 2);
    insert(1, 3);  // the key is taken
    inner.commit();
  } catch (const SqlError& e) {
    failed = true;
    EXPECT_FALSE(e.transient()) << e.what();
  }
  EXPECT_TRUE(failed);
  insert(3, 3);
  txn.commit();
  EXPECT_EQ(count(), 2);  // 1 and 3
}

TEST_P(SqlPipelineTest, LooksUpAStepAndItsCachedFailureAtOnce) {
  auto none = db_.lookUpStep("/nix/store/a.drv", 10);
  EXPECT_FALSE(none.step);
  EXPECT_FALSE(none.failure);
  StepRow s;
  s.drvPath = "/nix/store/a.drv";
  s.system = "x86_64-linux";
  int64_t id = db_.upsertStep(s);
  db_.startStep(id, "w", 5);
  auto step = db_.lookUpStep("/nix/store/a.drv", 10);
  ASSERT_TRUE(step.step);
  EXPECT_EQ(step.step->id, id);
  EXPECT_EQ(step.step->attempts, 1);
  EXPECT_FALSE(step.failure);
  db_.addCachedFailure({"/nix/store/a.drv", 7, 100, 500});
  db_.addCachedFailure({"/nix/store/b.drv", 1, 100, 0});
  auto both = db_.lookUpStep("/nix/store/a.drv", 10);
  ASSERT_TRUE(both.step && both.failure);
  EXPECT_EQ(both.failure->status, 7);
  EXPECT_EQ(both.failure->expiresMs, 500);
  EXPECT_FALSE(db_.lookUpStep("/nix/store/a.drv", 500).failure);  // expired
  auto failure = db_.lookUpStep("/nix/store/b.drv", 10);
  EXPECT_FALSE(failure.step);
  ASSERT_TRUE(failure.failure);
  EXPECT_EQ(failure.failure->status, 1);
}

// The batch forms (Ingestor::ingestAll): more rows than one statement
// takes (chunks of 256, 64, ...), paths already recorded, repeats.
TEST_P(SqlPipelineTest, InsertsLooksUpAndLinksStepsInBatches) {
  auto path = [](int i) { return "/nix/store/s" + std::to_string(i) + ".drv"; };
  StepRow first;
  first.drvPath = path(3);
  first.system = "x86_64-linux";
  int64_t existing = db_.upsertStep(first);
  db_.addCachedFailure({path(5), 1, 100, 0});
  std::vector<StepRow> rows;
  std::vector<std::string> paths;
  for (int i = 0; i < 333; i++) {
    StepRow r;
    r.drvPath = path(i);
    r.system = "x86_64-linux";
    r.pname = "p" + std::to_string(i);
    r.features = {"kvm"};
    r.createdMs = i;
    rows.push_back(r);
    paths.push_back(path(i));
  }
  paths.push_back(path(1000));  // never recorded
  std::vector<int64_t> ids;
  {
    StateDb::Transaction txn(db_);
    ids = db_.insertSteps(rows);
    std::vector<std::pair<int64_t, int64_t>> edges;
    for (size_t i = 1; i < ids.size(); i++) edges.emplace_back(ids[i], ids[0]);
    edges.emplace_back(ids[2], ids[0]);  // again
    db_.addStepDeps(edges);
    txn.commit();
  }
  ASSERT_EQ(ids.size(), rows.size());
  EXPECT_EQ(ids[3], existing);
  for (int i = 0; i < 333; i++) {
    auto row = db_.step(ids[i]);
    ASSERT_TRUE(row) << i;
    EXPECT_EQ(row->drvPath, path(i));
    if (i != 3) {
      EXPECT_EQ(row->pname, "p" + std::to_string(i));
      EXPECT_EQ(row->features, std::vector<std::string>{"kvm"});
    }
  }
  EXPECT_EQ(db_.stepDeps(ids[2]), std::vector<int64_t>{ids[0]});
  EXPECT_TRUE(db_.stepDeps(ids[0]).empty());
  auto found = db_.lookUpSteps(paths, 10);
  ASSERT_EQ(found.size(), paths.size());
  for (int i = 0; i < 333; i++) {
    ASSERT_TRUE(found[path(i)].step) << i;
    EXPECT_EQ(found[path(i)].step->id, ids[i]);
    EXPECT_EQ(found[path(i)].failure.has_value(), i == 5) << i;
  }
  EXPECT_EQ(found[path(5)].failure->status, 1);
  EXPECT_FALSE(found[path(1000)].step);
  EXPECT_FALSE(found[path(1000)].failure);
  EXPECT_TRUE(db_.lookUpSteps({}, 10).empty());
}

// A statement planned at each run (on PostgreSQL never prepared on the
// server) reads like any other, in a transaction after queued writes too.
TEST_P(SqlPipelineTest, AStatementPlannedAtEachRunSeesEarlierWrites) {
  auto sum = [&] {
    auto s = db_.db().prepareEachRun(
        "SELECT coalesce(sum(v), 0) FROM pipeline_t WHERE k IN (?, ?)");
    s.bind(1).bind(2);
    return s.step() ? s.getInt(0) : -1;
  };
  EXPECT_EQ(sum(), 0);
  insert(1, 10);
  EXPECT_EQ(sum(), 10);
  StateDb::Transaction txn(db_);
  insert(2, 5);
  EXPECT_EQ(sum(), 15);
  insert(3, 1);
  EXPECT_EQ(sum(), 15);
  txn.commit();
  EXPECT_EQ(sum(), 15);
  EXPECT_EQ(count(), 3);
}

}  // namespace
}  // namespace kiln::scheduler
