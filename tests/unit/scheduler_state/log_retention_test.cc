// How long build logs stay in the state database (log_store.h:
// endedLogPieces, pruneStepLogs), on both backends: pieces of ended
// attempts become their stored log once old enough, pieces of an attempt
// whose log is stored go at once, a running attempt's pieces stay, and
// finished logs go past their age only when one is set.
#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "kiln/scheduler/log_store.h"
#include "kiln/scheduler/logs.h"
#include "state_backends.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kHourMs = 3'600'000;
constexpr int64_t kNow = 100 * kHourMs;

class LogRetentionTest : public ::testing::TestWithParam<test::StateBackend> {
 protected:
  void SetUp() override {
    db_ = std::make_unique<StateDb>(
        test::freshStateDatabase(GetParam(), dir_.path()));
  }

  // A step of derivation `name` started at `startMs` (attempt 1).
  int64_t step(const std::string& name, int64_t startMs) {
    StepRow row;
    row.drvPath = "/nix/store/" + name + ".drv";
    int64_t id = db_->upsertStep(row);
    db_->startStep(id, "w1", startMs);
    return id;
  }

  // The pieces the database holds of `step`'s attempt `attempt`.
  int64_t pieces(int64_t step, int64_t attempt) {
    auto s = db_->db().prepare(
        "SELECT count(*) FROM step_log_chunks WHERE step = ? AND attempt = ?");
    s.bind(step).bind(attempt);
    return s.step() ? s.getInt(0) : -1;
  }

  // Each attempt's log as the database holds it: where, and the text.
  std::vector<std::pair<StepLog::Where, std::string>> logs(
      const std::string& name) {
    std::vector<std::pair<StepLog::Where, std::string>> out;
    for (auto& l : stepLogs(*db_, "", name + ".drv"))
      out.emplace_back(l.where, StepLogReader(l).read(*db_, 0, 1 << 20));
    return out;
  }

  TempDir dir_{"kiln-log-retention"};
  std::unique_ptr<StateDb> db_;
};

using Where = StepLog::Where;

TEST_P(LogRetentionTest, EndedAttemptsPiecesBecomeTheirStoredLogWhenOld) {
  // Finished two hours ago, its pieces left (a scheduler stopped).
  int64_t old = step("aaa-old", kNow - 3 * kHourMs);
  db_->finishStep(old, 0, kNow - 2 * kHourMs, "");
  appendLogChunks(*db_, {{old, 1, 0, "old, "}, {old, 1, 5, "whole\n"}});
  // Finished ten minutes ago: its pieces wait (the mirror may store the
  // whole file yet).
  int64_t recent = step("bbb-recent", kNow - kHourMs);
  db_->finishStep(recent, 0, kNow - 10 * 60'000, "");
  appendLogChunks(*db_, {{recent, 1, 0, "recent\n"}});
  // Running its second attempt, started two hours ago: the first
  // attempt's pieces go, the running one's stay.
  int64_t running = step("ccc-running", kNow - 4 * kHourMs);
  db_->startStep(running, "w2", kNow - 2 * kHourMs);
  appendLogChunks(
      *db_, {{running, 1, 0, "first try\n"}, {running, 2, 0, "second try\n"}});
  // Unfinished, its log stored already (a storing interrupted before the
  // pieces' delete): the pieces go whatever their age.
  int64_t stored = step("ddd-stored", kNow - 60'000);
  storeFinishedLog(*db_, stored, 1, compressLog("stored whole\n"));
  appendLogChunks(*db_, {{stored, 1, 0, "stale"}});

  auto ended = endedLogPieces(*db_, kNow - kHourMs, 100);
  ASSERT_EQ(ended.size(), 3u);
  EXPECT_EQ(ended[0].step, old);
  EXPECT_EQ(ended[0].drvPath, "/nix/store/aaa-old.drv");
  EXPECT_FALSE(ended[0].stored);
  EXPECT_EQ(ended[1].step, running);
  EXPECT_EQ(ended[1].attempt, 1);
  EXPECT_EQ(ended[2].step, stored);
  EXPECT_TRUE(ended[2].stored);

  LogRetention keep;  // pieces: 1 h; stored logs: for good
  auto n = pruneStepLogs(*db_, kNow, keep, 100);
  EXPECT_EQ(n.pieceAttempts, 3u);
  EXPECT_EQ(n.storedLogs, 0u);
  EXPECT_EQ(pieces(old, 1), 0);
  EXPECT_EQ(logs("aaa-old"),
            (decltype(logs("")){{Where::kStored, "old, whole\n"}}));
  EXPECT_EQ(pieces(recent, 1), 1);
  EXPECT_EQ(pieces(running, 1), 0);
  EXPECT_EQ(pieces(running, 2), 1);
  EXPECT_EQ(logs("ccc-running"),
            (decltype(logs("")){{Where::kStored, "first try\n"},
                                {Where::kLive, "second try\n"}}));
  EXPECT_EQ(pieces(stored, 1), 0);
  EXPECT_EQ(logs("ddd-stored"),
            (decltype(logs("")){{Where::kStored, "stored whole\n"}}));
  // Nothing more to do until the recent one is old enough.
  n = pruneStepLogs(*db_, kNow, keep, 100);
  EXPECT_EQ(n.pieceAttempts, 0u);
  n = pruneStepLogs(*db_, kNow + kHourMs, keep, 100);
  EXPECT_EQ(n.pieceAttempts, 1u);
  EXPECT_EQ(pieces(recent, 1), 0);
  EXPECT_EQ(logs("bbb-recent"),
            (decltype(logs("")){{Where::kStored, "recent\n"}}));
}

TEST_P(LogRetentionTest, StoredLogsGoPastTheirAgeOnlyWhenOneIsSet) {
  int64_t old = step("aaa-old", kNow - 50 * kHourMs);
  db_->finishStep(old, 0, kNow - 49 * kHourMs, "");
  storeFinishedLog(*db_, old, 1, compressLog("old\n"));
  int64_t young = step("bbb-young", kNow - 2 * kHourMs);
  db_->finishStep(young, 0, kNow - kHourMs, "");
  storeFinishedLog(*db_, young, 1, compressLog("young\n"));
  int64_t running = step("ccc-running", kNow - 60 * kHourMs);
  storeFinishedLog(*db_, running, 1, compressLog("running's first\n"));

  LogRetention r;
  EXPECT_EQ(pruneStepLogs(*db_, kNow, r, 100).storedLogs, 0u);
  EXPECT_EQ(logs("aaa-old").size(), 1u);
  r.storedLogsAfter = 48h;
  // In batches of one: call again while the count reaches the limit.
  auto n = pruneStepLogs(*db_, kNow, r, 1);
  EXPECT_EQ(n.storedLogs, 1u);
  EXPECT_TRUE(logs("aaa-old").empty());
  EXPECT_EQ(pruneStepLogs(*db_, kNow, r, 1).storedLogs, 0u);
  EXPECT_EQ(logs("bbb-young").size(), 1u);
  EXPECT_EQ(logs("ccc-running").size(), 1u);  // its step has not finished
  EXPECT_EQ(pruneStepLogs(*db_, kNow + 48 * kHourMs, r, 10).storedLogs, 1u);
  EXPECT_TRUE(logs("bbb-young").empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, LogRetentionTest, test::allStateBackends(),
                         test::stateBackendName);

}  // namespace
}  // namespace kiln::scheduler
