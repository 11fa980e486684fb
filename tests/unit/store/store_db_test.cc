#include "kiln/store/store_db.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln::store {
namespace {

std::string tableSql(SqliteDb& db) {
  auto st = db.prepare(
      "select sql from sqlite_master where sql is not null and "
      "name not like 'sqlite_%' order by name");
  std::string all;
  while (st.step()) all += st.getStr(0) + ";\n";
  return all;
}

// Squeezes whitespace and drops SQL comments so two DDL texts compare by
// content.
std::string normalise(const std::string& sql) {
  std::string out;
  std::istringstream in(sql);
  for (std::string line; std::getline(in, line);) {
    if (auto c = line.find("--"); c != std::string::npos) line.resize(c);
    std::istringstream words(line);
    for (std::string w; words >> w;) out += w + " ";
  }
  return out;
}

TEST(StoreDb, FreshDatabaseHasNixTablesAndLatestVersion) {
  TempDir dir;
  auto db = openStoreDb(dir.path() + "/db.sqlite", "/nix/store");
  EXPECT_EQ(db->userVersion(), kStoreSchemaVersion);
  auto sql = tableSql(*db);
  // Every statement of Nix's schema (spec vectors/db/schema.sql) is present
  // with the same text, modulo comments and spacing.
  std::string nix = readFile(test::vectorPath("db/schema.sql"));
  std::istringstream in(nix);
  std::string stmt;
  auto ours = normalise(sql);
  int compared = 0;
  for (std::string line; std::getline(in, line);) {
    stmt += line + "\n";
    if (line.empty() || line.back() != ';') continue;
    if (stmt.find("sqlite_sequence") == std::string::npos) {
      auto want = normalise(stmt);
      want.pop_back();  // the ';' is separated by our join
      EXPECT_NE(ours.find(want.substr(0, want.size() - 1)), std::string::npos)
          << want;
      ++compared;
    }
    stmt.clear();
  }
  EXPECT_EQ(compared, 8);  // 3 tables, 4 indexes, 1 trigger
  EXPECT_NE(sql.find("StoreMeta"), std::string::npos);
}

TEST(StoreDb, MigratesVersionOneKeepingRows) {
  TempDir dir;
  std::string path = dir.path() + "/db.sqlite";
  {
    SqliteDb db(path);
    migrateSchema(db, {storeSchemaMigrations()[0]});
    db.exec(
        "insert into ValidPaths (path, hash, registrationTime, narSize) values "
        "('/nix/store/9p0nl625gm5mli8h2xfsgma0zz31g9yc-t.txt', 'sha256:00', 1, "
        "120)");
  }
  auto db = openStoreDb(path, "/nix/store");
  EXPECT_EQ(db->userVersion(), 2);
  auto st = db->prepare("select count(*) from ValidPaths");
  ASSERT_TRUE(st.step());
  EXPECT_EQ(st.getInt(0), 1);
}

TEST(StoreDb, FutureVersionIsRefused) {
  TempDir dir;
  std::string path = dir.path() + "/db.sqlite";
  {
    SqliteDb db(path);
    db.exec("PRAGMA user_version = " + std::to_string(kStoreSchemaVersion + 1));
  }
  try {
    openStoreDb(path, "/nix/store");
    FAIL() << "opened a database from the future";
  } catch (const SchemaError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("newer"), std::string::npos);
  }
}

TEST(StoreDb, StoreDirectoryMismatchIsRefused) {
  TempDir dir;
  std::string path = dir.path() + "/db.sqlite";
  openStoreDb(path, "/nix/store");
  EXPECT_NO_THROW(openStoreDb(path, "/nix/store"));
  try {
    openStoreDb(path, "/other/store");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/other/store"), std::string::npos);
  }
}

TEST(StoreDb, SelfReferenceIsRemovedWithItsPath) {
  TempDir dir;
  auto db = openStoreDb(dir.path() + "/db.sqlite", "/nix/store");
  db->exec(
      "insert into ValidPaths (path, hash, registrationTime) values ('a', 'h', "
      "1), ('b', 'h', 1);"
      "insert into Refs values (1, 1), (1, 2);");
  // b is still referenced by a: the restrict FK refuses.
  EXPECT_THROW(db->exec("delete from ValidPaths where path = 'b'"), SqliteError);
  db->exec("delete from ValidPaths where path = 'a'");
  db->exec("delete from ValidPaths where path = 'b'");
}

}  // namespace
}  // namespace kiln::store
