#include "kiln/common/sqlite.h"

#include <gtest/gtest.h>

#include "kiln/common/file.h"

namespace kiln {
namespace {

TEST(Sqlite, StatementsBindAndRead) {
  TempDir dir;
  SqliteDb db(dir.path() + "/t.sqlite");
  db.exec("create table t (a integer, b text)");
  auto ins = db.prepare("insert into t values (?, ?)");
  ins.bind(int64_t{7}).bind("seven").exec();
  ins.bind(int64_t{8}).bindNull().exec();
  EXPECT_EQ(db.lastInsertRowId(), 2);
  auto q = db.prepare("select a, b from t order by a");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.getInt(0), 7);
  EXPECT_EQ(q.getStr(1), "seven");
  ASSERT_TRUE(q.step());
  EXPECT_TRUE(q.isNull(1));
  EXPECT_FALSE(q.step());
  auto mode = db.prepare("pragma journal_mode");
  ASSERT_TRUE(mode.step());
  EXPECT_EQ(mode.getStr(0), "wal");
}

TEST(Sqlite, ErrorsNameTheDatabaseAndStatement) {
  TempDir dir;
  SqliteDb db(dir.path() + "/t.sqlite");
  try {
    db.prepare("select * from missing");
    FAIL();
  } catch (const SqliteError& e) {
    EXPECT_NE(std::string(e.what()).find("t.sqlite"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos);
  }
  EXPECT_THROW(SqliteDb(dir.path() + "/no/such/dir.sqlite"), SqliteError);
}

TEST(Sqlite, TransactionRollsBackOnException) {
  TempDir dir;
  SqliteDb db(dir.path() + "/t.sqlite");
  db.exec("create table t (a integer)");
  try {
    SqliteTxn txn(db);
    db.exec("insert into t values (1)");
    throw Error("boom");
  } catch (const Error&) {
  }
  {
    SqliteTxn txn(db);
    db.exec("insert into t values (2)");
    txn.commit();
  }
  auto q = db.prepare("select group_concat(a) from t");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.getStr(0), "2");
}

// A transaction inside another is a savepoint: its commit becomes durable
// only with the outer one, and its rollback undoes only its own changes.
TEST(Sqlite, NestedTransactionsAreSavepointsOfTheOuterOne) {
  TempDir dir;
  SqliteDb db(dir.path() + "/t.sqlite");
  db.exec("create table t (a integer)");
  auto all = [&] {
    auto q = db.prepare("select coalesce(group_concat(a), '') from t");
    q.step();
    return q.getStr(0);
  };
  {
    SqliteTxn outer(db);
    db.exec("insert into t values (1)");
    {
      SqliteTxn inner(db);
      db.exec("insert into t values (2)");
      inner.commit();
    }
    {
      SqliteTxn undone(db);
      db.exec("insert into t values (3)");
    }
    EXPECT_EQ(all(), "1,2");
    // The outer transaction is dropped: the inner commit goes with it.
  }
  EXPECT_EQ(all(), "");
  {
    SqliteTxn outer(db);
    {
      SqliteTxn inner(db);
      db.exec("insert into t values (4)");
      inner.commit();
    }
    outer.commit();
  }
  EXPECT_EQ(all(), "4");
}

TEST(Sqlite, BusyIsRetried) {
  TempDir dir;
  std::string path = dir.path() + "/t.sqlite";
  SqliteDb a(path);
  a.exec("create table t (a integer)");
  SqliteDb b(path, {.busyTimeout = std::chrono::milliseconds(0)});
  auto txn = std::make_unique<SqliteTxn>(a);
  try {
    SqliteTxn t2(b);
    FAIL() << "second writer got the lock";
  } catch (const SqliteError& e) {
    EXPECT_TRUE(e.isBusy());
  }
  int attempts = 0;
  retrySqlite([&] {
    if (++attempts == 3) txn.reset();  // the first writer finishes
    SqliteTxn t2(b);
    b.exec("insert into t values (1)");
    t2.commit();
  });
  EXPECT_GE(attempts, 3);
}

const std::vector<SqliteMigration> kTwo = {
    {1, "create table a (x integer)"},
    {2, "alter table a add column y text"},
};

TEST(Sqlite, MigrationsRunInOrderOnce) {
  TempDir dir;
  std::string path = dir.path() + "/t.sqlite";
  {
    SqliteDb db(path);
    EXPECT_EQ(migrateSchema(db, {kTwo[0]}), 0);
    EXPECT_EQ(db.userVersion(), 1);
    db.exec("insert into a values (5)");
  }
  SqliteDb db(path);
  EXPECT_EQ(migrateSchema(db, kTwo), 1);
  EXPECT_EQ(db.userVersion(), 2);
  EXPECT_EQ(migrateSchema(db, kTwo), 2);  // idempotent
  auto q = db.prepare("select x, y from a");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.getInt(0), 5);
  EXPECT_TRUE(q.isNull(1));
}

TEST(Sqlite, FailedMigrationLeavesOldVersion) {
  TempDir dir;
  SqliteDb db(dir.path() + "/t.sqlite");
  migrateSchema(db, {kTwo[0]});
  std::vector<SqliteMigration> bad = {kTwo[0], {2, "this is not sql"}};
  EXPECT_THROW(migrateSchema(db, bad), SqliteError);
  EXPECT_EQ(db.userVersion(), 1);
}

TEST(Sqlite, FutureSchemaIsRefused) {
  TempDir dir;
  SqliteDb db(dir.path() + "/t.sqlite");
  migrateSchema(db, kTwo);
  try {
    migrateSchema(db, {kTwo[0]});
    FAIL();
  } catch (const SchemaError& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 2"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("newer"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln
