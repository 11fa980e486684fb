// The worker daemon against a fake scheduler on a fake transport (no
// sockets), turned on the test's thread with a FakeClock: Hello →
// BuildStep → NeedPaths → input transfer → /bin/sh build → LogChunks →
// upload → StepResult; heartbeats; cancellation; refusal.
#include "kiln/worker/daemon.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <mutex>

#include "daemon_fixture.h"

namespace kiln::worker {
namespace {

namespace proto = protocol;
using namespace std::chrono_literals;
using fixture::DaemonTest;

TEST_F(DaemonTest, HelloStepInputsBuildUploadResult) {
  startDaemon();
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::Hello>(); }));
  auto hello = *sched_.last<proto::Hello>();
  EXPECT_EQ(hello.workerId, "w1");
  EXPECT_EQ(hello.storeDir, storeDir_);
  EXPECT_EQ(hello.systems, std::vector<std::string>{"x86_64-linux"});
  EXPECT_EQ(hello.supportedFeatures, std::vector<std::string>{"big"});
  EXPECT_EQ(hello.slots, 2u);
  EXPECT_EQ(hello.speedFactor, 1.5);
  ASSERT_TRUE(pollUntilWelcomed());

  auto in = sched_.store.addText("greeting", "hello from the scheduler", {});
  auto m = step(7, "greet",
                "read x < $input; echo building $x; echo \"$x!\" > $out", in);
  sched_.send(m);
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::NeedPaths>(); }));
  auto need = *sched_.last<proto::NeedPaths>();
  EXPECT_EQ(need.stepId, 7u);
  EXPECT_EQ(need.paths, std::vector<store::StorePath>{in});
  sched_.serve(need);
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::StepResult>(); }))
      << error_;
  auto res = *sched_.last<proto::StepResult>();
  EXPECT_EQ(res.status, proto::StepStatus::kSuccess) << res.errorMsg;
  EXPECT_EQ(sched_.log, "building hello from the scheduler\n");
  ASSERT_EQ(res.outputs.size(), 1u);
  EXPECT_EQ(res.outputs[0].name, "out");
  EXPECT_EQ(res.outputs[0].info.path, outPath_);
  EXPECT_LE(res.startTimeMs, res.stopTimeMs);
  // The upload arrived before the result, verified and registered.
  ASSERT_EQ(sched_.uploads.size(), 1u);
  EXPECT_TRUE(sched_.uploads[0].ok) << sched_.uploads[0].error;
  auto central = sched_.store.requirePathInfo(outPath_);
  EXPECT_EQ(central.narHash, res.outputs[0].info.narHash);
  EXPECT_EQ(readFile(sched_.store.physicalPath(outPath_)),
            "hello from the scheduler!\n");
  // The worker keeps input and output in its own store.
  store::LocalStore mine(root_.path() + "/worker", store::StoreDir(storeDir_));
  EXPECT_TRUE(mine.isValid(in));
  EXPECT_TRUE(mine.isValid(outPath_));
  EXPECT_EQ(readFile(mine.physicalPath(outPath_)),
            "hello from the scheduler!\n");

  // A second step with the same input: nothing to fetch.
  sched_.send(proto::Ack{proto::MessageType::kStepResult, 7, true, ""});
  auto m2 = step(8, "greet2", "echo again > $out", in);
  sched_.received.clear();
  sched_.send(m2);
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::StepResult>(); }));
  EXPECT_EQ(sched_.last<proto::NeedPaths>(), nullptr);
  EXPECT_EQ(sched_.last<proto::StepResult>()->status,
            proto::StepStatus::kSuccess);
  // Heartbeats arrive on the interval of the Welcome (200 ms), counted
  // from the one the Welcome made at once.
  sched_.received.clear();
  clock_.advance(199ms);
  for (int i = 0; i < 3; ++i) daemon_->turn();
  sched_.pump();
  EXPECT_EQ(sched_.last<proto::Heartbeat>(), nullptr);
  clock_.advance(1ms);
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::Heartbeat>(); }));
  EXPECT_EQ(sched_.count<proto::Heartbeat>(), 1u);
}

// The scheduler leaves out the metadata of paths it believes the worker
// holds: the worker walks the closure from the roots and still asks for a
// root it lacks (the PathData header brings the metadata).
TEST_F(DaemonTest, ARootSentWithoutMetadataThatTheWorkerLacksIsFetched) {
  startDaemon();
  ASSERT_TRUE(pollUntilWelcomed());
  auto in = sched_.store.addText("greeting", "hello without metadata", {});
  auto m = step(9, "greet", "read x < $input; echo \"$x.\" > $out", in);
  m.inputs.clear();
  sched_.send(m);
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::NeedPaths>(); }));
  EXPECT_EQ(sched_.last<proto::NeedPaths>()->paths,
            std::vector<store::StorePath>{in});
  sched_.serve(*sched_.last<proto::NeedPaths>());
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::StepResult>(); }))
      << error_;
  EXPECT_EQ(sched_.last<proto::StepResult>()->status,
            proto::StepStatus::kSuccess)
      << sched_.last<proto::StepResult>()->errorMsg;
  EXPECT_EQ(readFile(sched_.store.physicalPath(outPath_)),
            "hello without metadata.\n");
}

TEST_F(DaemonTest, CancelStepKillsTheBuildAndReportsCancelled) {
  startDaemon();
  ASSERT_TRUE(pollUntilWelcomed());
  auto in = sched_.store.addText("in", "x", {});
  auto pidFile = root_.path() + "/pid";
  auto m = step(
      3, "sleeper",
      "/bin/sleep 1000 & echo $! > " + pidFile + "; echo started; wait", in);
  sched_.send(m);
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::NeedPaths>(); }));
  sched_.serve(*sched_.last<proto::NeedPaths>());
  ASSERT_TRUE(pumpUntil([&] { return sched_.log == "started\n"; }));
  sched_.send(proto::CancelStep{3, "test"});
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::StepResult>(); }));
  EXPECT_EQ(sched_.last<proto::StepResult>()->status,
            proto::StepStatus::kCancelled)
      << sched_.last<proto::StepResult>()->errorMsg << sched_.log;
  int pid = std::stoi(readFile(pidFile));
  EXPECT_TRUE(test::pollUntil([&] { return kill(pid, 0) != 0; }, 10s))
      << "the builder's child survived";
}

/// Records the session nices the worker writes (from its slot threads).
class RecordingNice : public SessionNice {
 public:
  bool set(pid_t pid, int nice) override {
    std::lock_guard lock(mutex);
    writes.emplace_back(pid, nice);
    return true;
  }
  std::vector<std::pair<pid_t, int>> taken() {
    std::lock_guard lock(mutex);
    return writes;
  }
  std::mutex mutex;
  std::vector<std::pair<pid_t, int>> writes;
};

// Two builds on one core: the step of higher rank (BuildStep.rankMs) takes
// the core from the one already running, which gets it back at the end.
TEST_F(DaemonTest, TheStepOfHigherRankGetsTheCpu) {
  auto nice = std::make_shared<RecordingNice>();
  sessionNice_ = nice;
  cores_ = 1;
  startDaemon();
  ASSERT_TRUE(pollUntilWelcomed());
  auto in = sched_.store.addText("in", "x", {});
  auto dir = root_.path();
  auto low = step(11, "low",
                  "echo $$ > " + dir + "/low.pid; while [ ! -e " + dir +
                      "/go ]; do sleep 0.05; done; echo > $out",
                  in);
  low.rankMs = 1000;
  sched_.send(low);
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::NeedPaths>(); }));
  sched_.serve(*sched_.last<proto::NeedPaths>());
  ASSERT_TRUE(pumpUntil([&] { return pathExists(dir + "/low.pid"); }));
  pid_t lowPid = std::stoi(readFile(dir + "/low.pid"));
  auto high = step(
      12, "high",
      "while [ ! -e " + dir + "/go ]; do sleep 0.05; done; echo > $out", in);
  high.rankMs = 5000;
  sched_.send(high);
  using P = std::pair<pid_t, int>;
  ASSERT_TRUE(pumpUntil([&] { return !nice->taken().empty(); }));
  EXPECT_EQ(nice->taken(), (std::vector<P>{{lowPid, kIdleShareNice}}));
  writeFile(dir + "/go", "");
  ASSERT_TRUE(pumpUntil([&] {
    int results = 0;
    for (auto& m : sched_.received)
      results += std::holds_alternative<proto::StepResult>(m);
    return results == 2;
  }));
  // Whichever ended first: if `high` did, `low` got the core back.
  auto writes = nice->taken();
  ASSERT_GE(writes.size(), 1u);
  EXPECT_LE(writes.size(), 2u);
  if (writes.size() == 2) {
    EXPECT_EQ(writes[1], (P{lowPid, kFullShareNice}));
  }
}

TEST_F(DaemonTest, RefusedWorkerStopsWithTheReason) {
  sched_.autoWelcome = false;
  startDaemon();
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::Hello>(); }));
  sched_.send(proto::Refused{2, proto::versionMismatchText(2, 1)});
  ASSERT_TRUE(pumpUntil([&] { return ended_; }));
  EXPECT_NE(error_.find("scheduler speaks protocol 2, this worker speaks 1"),
            std::string::npos)
      << error_;
}

// A restarted scheduler answers messages queued before the worker's Hello
// with Bye; that must not trigger a second Hello (the scheduler would
// replace the worker and retry what it had just sent). A Bye once
// welcomed does.
TEST_F(DaemonTest, OnlyAByeAfterTheWelcomeTriggersANewHello) {
  sched_.autoWelcome = false;
  startDaemon();
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::Hello>(); }));
  sched_.send(proto::Bye{"unknown worker: send Hello again"});
  sched_.welcome();
  // Welcome makes the worker send a Heartbeat at once; a Hello caused by
  // the Bye would have come before it.
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::Heartbeat>(); }));
  auto hellos = [&] {
    return std::count_if(sched_.received.begin(), sched_.received.end(),
                         [](const proto::Message& m) {
                           return std::holds_alternative<proto::Hello>(m);
                         });
  };
  EXPECT_EQ(hellos(), 1);
  sched_.send(proto::Bye{"unknown worker: send Hello again"});
  ASSERT_TRUE(pumpUntil([&] { return hellos() == 2; }));
}

// A key the scheduler rejects during the handshake stops the worker with
// the transport's reason, before any Hello.
TEST_F(DaemonTest, AHandshakeRefusalStopsTheWorker) {
  sched_.link->refuseHandshake("the scheduler refused this worker's key");
  startDaemon();
  ASSERT_TRUE(pumpUntil([&] { return ended_; }));
  EXPECT_EQ(error_, "the scheduler refused this worker's key");
  EXPECT_TRUE(sched_.received.empty());
}

// Without a Welcome the worker says Hello again after helloRetryMin (2 s),
// then after twice as long: timed on the fake clock alone.
TEST_F(DaemonTest, HelloIsRepeatedWithBackoffUntilWelcomed) {
  sched_.autoWelcome = false;
  startDaemon();
  ASSERT_TRUE(pumpUntil([&] { return sched_.count<proto::Hello>() == 1; }));
  auto hellosAfter = [&](std::chrono::milliseconds d) {
    clock_.advance(d);
    for (int i = 0; i < 3; ++i) daemon_->turn();
    sched_.pump();
    return sched_.count<proto::Hello>();
  };
  EXPECT_EQ(hellosAfter(2000ms), 1u);
  EXPECT_EQ(hellosAfter(1ms), 2u);
  EXPECT_EQ(hellosAfter(4000ms), 2u);
  EXPECT_EQ(hellosAfter(1ms), 3u);
  sched_.welcome();
  ASSERT_TRUE(pollUntilWelcomed());
  EXPECT_EQ(hellosAfter(60000ms), 3u);
}

// A step stays held until its result is acknowledged: each Hello lists it;
// adopted by the Welcome, its outputs are uploaded again and its result
// sent again; not adopted, it is dropped.
TEST_F(DaemonTest, AnUnacknowledgedStepIsResumedIfAdoptedElseDropped) {
  startDaemon();
  ASSERT_TRUE(pollUntilWelcomed());
  auto in = sched_.store.addText("greeting", "hi", {});
  // Shell builtins only: the builder has no PATH.
  auto m = step(7, "greet", "read x < $input; echo \"$x\" > $out", in);
  sched_.send(m);
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::NeedPaths>(); }));
  sched_.serve(*sched_.last<proto::NeedPaths>());
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::StepResult>(); }));
  ASSERT_EQ(sched_.last<proto::StepResult>()->status,
            proto::StepStatus::kSuccess)
      << sched_.last<proto::StepResult>()->errorMsg;
  ASSERT_EQ(sched_.uploads.size(), 1u);
  // No Ack: as if the scheduler restarted. The worker says Hello again.
  auto helloAfterBye = [&] {
    sched_.received.clear();
    sched_.send(proto::Bye{"unknown worker: send Hello again"});
    // The Welcome's Heartbeat follows the Hello (an earlier one may not).
    EXPECT_TRUE(pumpUntil([&] {
      auto& r = sched_.received;
      auto h = std::find_if(r.begin(), r.end(), [](const proto::Message& x) {
        return std::holds_alternative<proto::Hello>(x);
      });
      return h != r.end() &&
             std::any_of(h, r.end(), [](const proto::Message& x) {
               return std::holds_alternative<proto::Heartbeat>(x);
             });
    }));
    auto* h = sched_.last<proto::Hello>();
    return h ? h->heldSteps : std::vector<proto::HeldStep>{{0, m.drvPath}};
  };
  sched_.adopt = {7};
  EXPECT_EQ(helloAfterBye(),
            (std::vector<proto::HeldStep>{{7, m.drvPath, true}}));
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::StepResult>(); }));
  ASSERT_EQ(sched_.uploads.size(), 2u);
  EXPECT_TRUE(sched_.uploads.back().ok) << sched_.uploads.back().error;
  auto result = *sched_.last<proto::StepResult>();
  EXPECT_EQ(result.status, proto::StepStatus::kSuccess) << result.errorMsg;
  ASSERT_EQ(result.outputs.size(), 1u);
  EXPECT_EQ(result.outputs[0].info.path, outPath_);
  // Not adopted now: dropped, nothing sent again, not held any more.
  sched_.adopt = {};
  EXPECT_EQ(helloAfterBye(),
            (std::vector<proto::HeldStep>{{7, m.drvPath, true}}));
  EXPECT_EQ(sched_.last<proto::StepResult>(), nullptr);
  EXPECT_EQ(helloAfterBye(), std::vector<proto::HeldStep>{});
  EXPECT_EQ(sched_.uploads.size(), 2u);
}

TEST_F(DaemonTest, DebugProtocolVersionIsRefusedByTheServer) {
  debug_.protocolVersion = 9;
  startDaemon();
  // The Server answers another version with Refused and never hands the
  // Hello over; the worker stops with the reason.
  ASSERT_TRUE(pumpUntil([&] { return ended_; }));
  EXPECT_NE(error_.find("scheduler speaks protocol 5, this worker speaks 9"),
            std::string::npos)
      << error_;
  EXPECT_EQ(sched_.last<proto::Hello>(), nullptr);
}

TEST_F(DaemonTest, DebugCorruptUploadIsRefusedThenTheRetrySucceeds) {
  debug_.corruptUploads = 1;
  startDaemon();
  ASSERT_TRUE(pollUntilWelcomed());
  auto in = sched_.store.addText("in", "x", {});
  auto m = step(5, "corrupt", "echo some output > $out", in);
  sched_.send(m);
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::NeedPaths>(); }));
  sched_.serve(*sched_.last<proto::NeedPaths>());
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::StepResult>(); }));
  auto res = *sched_.last<proto::StepResult>();
  EXPECT_EQ(res.status, proto::StepStatus::kAborted);
  EXPECT_NE(res.errorMsg.find("NAR hash mismatch"), std::string::npos)
      << res.errorMsg;
  ASSERT_EQ(sched_.uploads.size(), 1u);
  EXPECT_FALSE(sched_.uploads[0].ok);
  EXPECT_FALSE(sched_.store.isValid(outPath_));
  // The retry (a new step id) uploads the output already built, intact.
  sched_.send(proto::Ack{proto::MessageType::kStepResult, 5, true, ""});
  sched_.received.clear();
  m.stepId = 6;
  sched_.send(m);
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::StepResult>(); }));
  EXPECT_EQ(sched_.last<proto::StepResult>()->status,
            proto::StepStatus::kSuccess);
  ASSERT_EQ(sched_.uploads.size(), 2u);
  EXPECT_TRUE(sched_.uploads[1].ok) << sched_.uploads[1].error;
  EXPECT_EQ(readFile(sched_.store.physicalPath(outPath_)), "some output\n");
}

TEST_F(DaemonTest, BadDrvIsReportedAsFailed) {
  startDaemon();
  ASSERT_TRUE(pollUntilWelcomed());
  auto in = sched_.store.addText("in", "x", {});
  auto m = step(4, "bad", "true", in);
  m.drv += " ";  // no longer the text its path names
  sched_.send(m);
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::StepResult>(); }));
  auto res = *sched_.last<proto::StepResult>();
  EXPECT_EQ(res.status, proto::StepStatus::kFailed);
  EXPECT_NE(res.errorMsg.find("trailing"), std::string::npos) << res.errorMsg;
}

// A reproducibility check's build (BuildStep::check, docs/protocol.md
// "Check builds"): built and uploaded, never registered in the worker's
// store; once the worker holds the output (an ordinary build), a check of
// it fails instead of reusing it.
TEST_F(DaemonTest, ACheckBuildIsUploadedButNeverRegistered) {
  startDaemon();
  ASSERT_TRUE(pollUntilWelcomed());
  auto in = sched_.store.addText("seed", "x", {});
  auto m = step(11, "checked", "echo checked > $out", in);
  m.check = true;
  sched_.send(m);
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::NeedPaths>(); }));
  sched_.serve(*sched_.last<proto::NeedPaths>());
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::StepResult>(); }))
      << error_;
  auto res = *sched_.last<proto::StepResult>();
  EXPECT_EQ(res.status, proto::StepStatus::kSuccess) << res.errorMsg;
  ASSERT_EQ(sched_.uploads.size(), 1u);
  EXPECT_TRUE(sched_.uploads[0].ok) << sched_.uploads[0].error;
  EXPECT_EQ(readFile(sched_.store.physicalPath(outPath_)), "checked\n");
  store::LocalStore mine(root_.path() + "/worker", store::StoreDir(storeDir_));
  EXPECT_FALSE(mine.isValid(outPath_));
  EXPECT_FALSE(pathExists(mine.physicalPath(outPath_)));

  // An ordinary build registers it; a check of it then cannot run here.
  sched_.send(proto::Ack{proto::MessageType::kStepResult, 11, true, ""});
  sched_.received.clear();
  m.stepId = 12;
  m.check = false;
  sched_.send(m);
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::StepResult>(); }));
  EXPECT_TRUE(mine.isValid(outPath_));
  sched_.send(proto::Ack{proto::MessageType::kStepResult, 12, true, ""});
  sched_.received.clear();
  m.stepId = 13;
  m.check = true;
  sched_.send(m);
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::StepResult>(); }));
  res = *sched_.last<proto::StepResult>();
  EXPECT_EQ(res.status, proto::StepStatus::kAborted);
  EXPECT_TRUE(res.errorMsg.starts_with(proto::kCheckRefusedPrefix))
      << "the scheduler tells the refusal apart: " << res.errorMsg;
}

}  // namespace
}  // namespace kiln::worker
