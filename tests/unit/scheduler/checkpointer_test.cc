// WAL checkpoints run on the checkpointer's thread: the writer's connection
// has automatic checkpoints off, and its pages still reach the database
// file.
#include "kiln/scheduler/checkpointer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "kiln/common/file.h"
#include "kiln/common/sqlite.h"
#include "test_support.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;

off_t fileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

TEST(Checkpointer, CopiesTheWalIntoTheDatabaseOffTheWritersThread) {
  TempDir dir("kiln-ckpt");
  std::string path = dir.path() + "/state.sqlite";
  SqliteDb writer(path);
  writer.exec("PRAGMA wal_autocheckpoint = 0");
  writer.exec("CREATE TABLE t (x TEXT)");
  {
    SqliteTxn txn(writer);
    auto st = writer.prepare("INSERT INTO t (x) VALUES (?)");
    for (int i = 0; i < 2000; ++i)
      st.bind(std::string(200, 'a' + i % 26)).exec();
    txn.commit();
  }
  off_t before = fileSize(path);
  EXPECT_GT(fileSize(path + "-wal"), 400000);  // the rows wait in the WAL
  Checkpointer ckpt(path, 10ms);
  ASSERT_TRUE(test::pollUntil([&] { return ckpt.checkpoints() > 0; }, 20s));
  EXPECT_GT(fileSize(path), before + 400000);
  auto st = writer.prepare("SELECT count(*) FROM t");
  ASSERT_TRUE(st.step());
  EXPECT_EQ(st.getInt(0), 2000);
}

TEST(Checkpointer, AMissingDatabaseIsLoggedNotThrown) {
  TempDir dir("kiln-ckpt");
  Checkpointer ckpt(dir.path() + "/absent.sqlite", 10ms);
  EXPECT_EQ(ckpt.checkpoints(), 0u);
}

}  // namespace
}  // namespace kiln::scheduler
