// Build logs in the state database (log_store.h) and reading them back
// with the files (logs.h), on both backends.
#include "kiln/scheduler/log_store.h"

#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "kiln/scheduler/logs.h"
#include "state_backends.h"

namespace kiln::scheduler {
namespace {

// Text that does not compress to nothing: numbered lines (`bytes` long).
std::string someLog(size_t bytes) {
  std::string out;
  for (uint64_t n = 0; out.size() < bytes; ++n)
    out +=
        "line " + std::to_string(n * 2654435761u % 1000003) + " of the log\n";
  out.resize(bytes);
  return out;
}

// Everything `reader` reads from `offset`, in pieces of `piece` bytes.
std::string readAll(StepLogReader& reader, StateDb& db, size_t piece,
                    int64_t offset = 0) {
  std::string out;
  for (;;) {
    std::string p = reader.read(db, offset + int64_t(out.size()), piece);
    EXPECT_LE(p.size(), piece);
    if (p.empty()) return out;
    out += p;
  }
}

class LogStoreTest : public ::testing::TestWithParam<test::StateBackend> {
 protected:
  void SetUp() override {
    db_ = std::make_unique<StateDb>(
        test::freshStateDatabase(GetParam(), dir_.path()));
    StepRow row;
    row.drvPath = drv_;
    step_ = db_->upsertStep(row);
    db_->startStep(step_, "w1", 10);
    createDirs(dir_.path() + "/logs");
  }

  StepLog only() {
    auto logs = stepLogs(*db_, dir_.path(), drv_);
    EXPECT_EQ(logs.size(), 1u);
    return logs.empty() ? StepLog{} : logs[0];
  }

  TempDir dir_{"kiln-log-store"};
  std::unique_ptr<StateDb> db_;
  const std::string drv_ = "/nix/store/abc-x.drv";
  int64_t step_ = 0;
};

// A running attempt's pieces are read at any offset, in bounded pieces,
// up to the first gap; bytes that are not UTF-8 come back as they went in.
TEST_P(LogStoreTest, PiecesOfARunningAttemptReadFromAnyOffset) {
  std::string a = std::string("one\n\xff\0two\n", 10), b = "three\n";
  {
    StateDb::Transaction txn(*db_);
    appendLogChunks(*db_, {{step_, 1, 0, a}, {step_, 1, 10, b}});
    txn.commit();
  }
  EXPECT_EQ(logChunksEnd(*db_, step_, 1), 16);
  EXPECT_EQ(logChunksEnd(*db_, step_, 2), 0);
  StepLog log = only();
  EXPECT_EQ(log.where, StepLog::Where::kLive);
  EXPECT_EQ(log.size, 16);
  StepLogReader reader(log);
  EXPECT_EQ(readAll(reader, *db_, 3), a + b);
  EXPECT_EQ(reader.read(*db_, 8, 100), "o\nthree\n");
  EXPECT_EQ(reader.read(*db_, 16, 100), "");
  appendLogChunks(*db_, {{step_, 1, 20, "after a gap"}});
  EXPECT_EQ(reader.read(*db_, 11, 100), "hree\n");  // stops at the gap
}

// A finished attempt's log is one compressed row: its pieces are gone, it
// reads back whole in small pieces across the row's slices, and reading
// before the last position starts again.
TEST_P(LogStoreTest, AFinishedLogIsOneCompressedRowReadInPieces) {
  std::string text = someLog(1'500'000);
  appendLogChunks(*db_, {{step_, 1, 0, text.substr(0, 100)}});
  auto compressed = compressLog(text);
  EXPECT_EQ(compressed.size, int64_t(text.size()));
  EXPECT_LT(compressed.body.size(), text.size() / 3);
  storeFinishedLog(*db_, step_, 1, compressed);
  EXPECT_EQ(logChunksEnd(*db_, step_, 1), 0);
  StepLog log = only();
  EXPECT_EQ(log.where, StepLog::Where::kStored);
  EXPECT_EQ(log.size, int64_t(text.size()));
  EXPECT_EQ(log.storedBytes, int64_t(compressed.body.size()));
  StepLogReader reader(log);
  EXPECT_TRUE(readAll(reader, *db_, 100'000) == text);
  EXPECT_EQ(reader.read(*db_, 1'000'000, 20), text.substr(1'000'000, 20));
  EXPECT_EQ(reader.read(*db_, 5, 10), text.substr(5, 10));
  EXPECT_EQ(reader.read(*db_, int64_t(text.size()), 10), "");
  // Storing it again replaces it.
  storeFinishedLog(*db_, step_, 1, compressLog("again\n"));
  StepLogReader again(only());
  EXPECT_EQ(readAll(again, *db_, 4), "again\n");
}

// The database's copy wins over the file; attempts it does not hold are
// read from their files; an attempt the database holds past the step's
// recorded count is listed too; clearStepLog forgets an attempt.
TEST_P(LogStoreTest, TheDatabaseIsReadFirstThenTheFiles) {
  db_->startStep(step_, "w1", 20);
  for (int n : {1, 2})
    writeFile(stepLogPath(dir_.path(), drv_, n), "file " + std::to_string(n));
  storeFinishedLog(*db_, step_, 1, compressLog("stored 1"));
  appendLogChunks(*db_, {{step_, 3, 0, "live 3"}});
  auto logs = stepLogs(*db_, dir_.path(), "abc-x.drv");
  ASSERT_EQ(logs.size(), 3u);
  EXPECT_EQ(logs[0].where, StepLog::Where::kStored);
  EXPECT_EQ(logs[1].where, StepLog::Where::kFile);
  EXPECT_EQ(logs[1].size, 6);
  EXPECT_EQ(logs[2].where, StepLog::Where::kLive);
  std::vector<std::string> texts;
  for (auto& l : logs) {
    StepLogReader r(l);
    texts.push_back(readAll(r, *db_, 64));
  }
  EXPECT_EQ(texts, (std::vector<std::string>{"stored 1", "file 2", "live 3"}));
  // Without a state directory only the database's logs are found.
  EXPECT_EQ(stepLogs(*db_, "", drv_).size(), 2u);
  clearStepLog(*db_, step_, 1);
  clearStepLog(*db_, step_, 3);
  logs = stepLogs(*db_, dir_.path(), drv_);
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_EQ(logs[0].where, StepLog::Where::kFile);
  EXPECT_TRUE(stepLogs(*db_, dir_.path(), "abc-unknown.drv").empty());
}

// A corrupt or truncated row, or one whose size is wrong, is an error
// naming the step and attempt, never a crash or a wrong log.
TEST_P(LogStoreTest, ACorruptStoredLogIsAClearError) {
  std::string text = someLog(300'000);
  auto good = compressLog(text);
  auto expectCorrupt = [&](const CompressedLog& bad) {
    storeFinishedLog(*db_, step_, 1, bad);
    StepLogReader reader(only());
    try {
      readAll(reader, *db_, 1 << 20);
      ADD_FAILURE() << "no error";
    } catch (const CorruptLogError& e) {
      EXPECT_NE(std::string(e.what()).find("step " + std::to_string(step_) +
                                           " attempt 1 is corrupt"),
                std::string::npos)
          << e.what();
    }
  };
  expectCorrupt({10, "not zstd at all"});
  expectCorrupt(
      {int64_t(text.size()), good.body.substr(0, good.body.size() / 2)});
  expectCorrupt({int64_t(text.size()) + 1, good.body});
  CompressedLog flipped = good;
  flipped.body[flipped.body.size() / 2] ^= 0x55;
  expectCorrupt(flipped);
}

INSTANTIATE_TEST_SUITE_P(Backends, LogStoreTest, test::allStateBackends(),
                         test::stateBackendName);

// A file is compressed in pieces, up to a limit; a missing one is empty.
TEST(CompressLogFile, ReadsUpToTheLimit) {
  TempDir dir("kiln-log-store");
  std::string text = someLog(3'000'000);
  writeFile(dir.path() + "/a.log", text);
  auto whole = compressLogFile(dir.path() + "/a.log", 0);
  EXPECT_EQ(whole.size, int64_t(text.size()));
  auto cut = compressLogFile(dir.path() + "/a.log", 1000);
  EXPECT_EQ(cut.size, 1000);
  EXPECT_EQ(compressLogFile(dir.path() + "/missing.log", 0).size, 0);
}

}  // namespace
}  // namespace kiln::scheduler
