// The log mirror (scheduler/src/log_mirror.h): what the log files gain goes
// into the state database as pieces, an ended attempt's whole file as one
// compressed row, an adopted attempt goes on where its pieces end; turns
// are run by hand (no thread), on both backends.
#include "log_mirror.h"

#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "kiln/scheduler/log_store.h"
#include "kiln/scheduler/logs.h"
#include "state_backends.h"
#include "test_support.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;

class LogMirrorTest : public ::testing::TestWithParam<test::StateBackend> {
 protected:
  void SetUp() override {
    spec_ = test::freshStateDatabase(GetParam(), dir_.path());
    db_ = std::make_unique<StateDb>(spec_);
    StepRow row;
    row.drvPath = "/nix/store/abc-x.drv";
    step_ = db_->upsertStep(row);
    db_->startStep(step_, "w1", 10);
    path_ = dir_.path() + "/a.log";
  }

  LogMirror::Options options(uint64_t maxLogBytes = 0) {
    LogMirror::Options o;
    o.thread = false;
    o.maxLogBytes = maxLogBytes;
    return o;
  }

  // The newest attempt's log as the database holds it.
  std::pair<StepLog::Where, std::string> stored() {
    auto logs = stepLogs(*db_, "", "abc-x.drv");
    if (logs.empty()) return {StepLog::Where::kFile, "<none>"};
    StepLogReader r(logs.back());
    return {logs.back().where, r.read(*db_, 0, 1 << 20)};
  }

  TempDir dir_{"kiln-log-mirror"};
  DatabaseSpec spec_;
  std::unique_ptr<StateDb> db_;
  int64_t step_ = 0;
  std::string path_;
  FakeClock clock_;
};

TEST_P(LogMirrorTest, MirrorsPiecesThenTheWholeLog) {
  LogMirror mirror(spec_, options(), clock_);
  appendLogChunks(*db_, {{step_, 1, 0, "stale piece of an earlier try"}});
  writeFile(path_, "one\n");
  mirror.begin(step_, 1, path_, false);
  EXPECT_TRUE(mirror.turn());
  EXPECT_EQ(stored(), std::pair(StepLog::Where::kLive, std::string("one\n")));
  writeFile(path_, "one\ntwo\n");
  EXPECT_TRUE(mirror.turn());
  EXPECT_EQ(stored(),
            std::pair(StepLog::Where::kLive, std::string("one\ntwo\n")));
  writeFile(path_, "one\ntwo\nend\n");
  mirror.finish(step_, 1);
  EXPECT_TRUE(mirror.turn());
  EXPECT_EQ(stored(),
            std::pair(StepLog::Where::kStored, std::string("one\ntwo\nend\n")));
  EXPECT_EQ(logChunksEnd(*db_, step_, 1), 0);
}

// The mirror's thread waits its interval on the clock: parked while the
// clock stands still (fake time unmoved), it mirrors once the test moves
// the clock by the interval.
TEST_P(LogMirrorTest, TheThreadTurnsEveryIntervalOfTheClock) {
  auto o = options();
  o.thread = true;
  auto t0 = clock_.now();
  auto mirror = std::make_unique<LogMirror>(spec_, o, clock_);
  ASSERT_TRUE(test::pollUntil([&] { return clock_.blockedWaits() == 1; }, 10s));
  writeFile(path_, "one\n");
  mirror->begin(step_, 1, path_, false);
  EXPECT_EQ(clock_.now(), t0);
  clock_.advance(o.interval);
  EXPECT_TRUE(test::pollUntil([&] { return stored().second == "one\n"; }, 10s));
  mirror.reset();  // a last turn, then the thread ends
  EXPECT_EQ(clock_.now() - t0, o.interval);
}

TEST_P(LogMirrorTest, AnAdoptedAttemptGoesOnWhereItsPiecesEnd) {
  appendLogChunks(*db_, {{step_, 1, 0, "before "}});
  writeFile(path_, "before the restart\n");
  LogMirror mirror(spec_, options(), clock_);
  mirror.begin(step_, 1, path_, true);
  EXPECT_TRUE(mirror.turn());
  EXPECT_EQ(stored().second, "before the restart\n");
}

TEST_P(LogMirrorTest, BoundsTurnsAndLogsAndSkipsAnAttemptWithoutAFile) {
  auto o = options(100);
  o.maxTurnBytes = 30;
  LogMirror mirror(spec_, o, clock_);
  writeFile(path_, std::string(500, 'x'));
  mirror.begin(step_, 1, path_, false);
  EXPECT_FALSE(mirror.turn());  // 30 of 100 bytes: more waits
  EXPECT_EQ(logChunksEnd(*db_, step_, 1), 30);
  while (!mirror.turn()) {
  }
  EXPECT_EQ(logChunksEnd(*db_, step_, 1), 100);  // the limit
  mirror.finish(step_, 1);
  EXPECT_TRUE(mirror.turn());
  EXPECT_EQ(stored().second, std::string(100, 'x'));
  db_->startStep(step_, "w1", 20);
  mirror.begin(step_, 2, dir_.path() + "/never-written.log", false);
  mirror.finish(step_, 2);
  EXPECT_TRUE(mirror.turn());
  EXPECT_EQ(stepLogs(*db_, "", "abc-x.drv").size(), 1u);
}

// Pieces a stopped scheduler left of attempts that ended meanwhile are
// stored whole when the mirror starts: from the file, or without one from
// the pieces; a running attempt's are left for its adoption.
TEST_P(LogMirrorTest, StoresTheEndedAttemptsAStoppedSchedulerLeft) {
  db_->startStep(step_, "w1", 20);  // attempt 2 superseded attempt 1
  createDirs(dir_.path() + "/logs");
  writeFile(stepLogPath(dir_.path(), "abc-x.drv", 1), "whole first\n");
  appendLogChunks(*db_, {{step_, 1, 0, "whole"}, {step_, 2, 0, "running"}});
  StepRow other;
  other.drvPath = "/nix/store/abd-y.drv";
  int64_t done = db_->upsertStep(other);
  db_->startStep(done, "w1", 10);
  db_->finishStep(done, 0, 30, "");
  appendLogChunks(*db_, {{done, 1, 0, "no file, "}, {done, 1, 9, "pieces\n"}});
  auto o = options();
  o.stateDir = dir_.path();
  LogMirror mirror(spec_, o, clock_);
  EXPECT_TRUE(mirror.turn());
  auto logs = stepLogs(*db_, "", "abc-x.drv");
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_EQ(logs[0].where, StepLog::Where::kStored);
  EXPECT_EQ(StepLogReader(logs[0]).read(*db_, 0, 100), "whole first\n");
  EXPECT_EQ(logs[1].where, StepLog::Where::kLive);
  auto other_logs = stepLogs(*db_, "", "abd-y.drv");
  ASSERT_EQ(other_logs.size(), 1u);
  EXPECT_EQ(other_logs[0].where, StepLog::Where::kStored);
  EXPECT_EQ(StepLogReader(other_logs[0]).read(*db_, 0, 100),
            "no file, pieces\n");
}

// The mirror applies the logs' retention (log_store.h) at its first turn,
// then once per prune interval: an ended attempt's pieces, old enough,
// become its stored log.
TEST_P(LogMirrorTest, PrunesAtTheFirstTurnThenEachInterval) {
  FakeClock clock{WallTime{std::chrono::hours(100)}};
  auto endedWithPieces = [&](const std::string& name) {
    StepRow row;
    row.drvPath = "/nix/store/" + name + ".drv";
    int64_t id = db_->upsertStep(row);
    db_->startStep(id, "w1", 10);
    db_->finishStep(id, 0, 20, "");
    appendLogChunks(*db_, {{id, 1, 0, name + " log\n"}});
    return id;
  };
  auto where = [&](const std::string& name) {
    auto logs = stepLogs(*db_, "", name + ".drv");
    return logs.size() == 1 ? logs[0].where : StepLog::Where::kFile;
  };
  endedWithPieces("abe-first");
  auto o = options();
  o.pruneInterval = std::chrono::minutes(10);
  LogMirror mirror(spec_, o, clock);
  EXPECT_TRUE(mirror.turn());
  EXPECT_EQ(where("abe-first"), StepLog::Where::kStored);
  endedWithPieces("abf-second");
  EXPECT_TRUE(mirror.turn());
  EXPECT_EQ(where("abf-second"), StepLog::Where::kLive);  // not due yet
  clock.advance(std::chrono::minutes(10));
  EXPECT_TRUE(mirror.turn());
  EXPECT_EQ(where("abf-second"), StepLog::Where::kStored);
  EXPECT_EQ(
      StepLogReader(stepLogs(*db_, "", "abf-second.drv")[0]).read(*db_, 0, 100),
      "abf-second log\n");
}

INSTANTIATE_TEST_SUITE_P(Backends, LogMirrorTest, test::allStateBackends(),
                         test::stateBackendName);

}  // namespace
}  // namespace kiln::scheduler
