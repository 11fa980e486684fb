// The build runner's supervision (silence, total timeout, log limit,
// cancellation) driven by a scripted fake process and a fake clock: exact
// timings, no real waiting.
#include <gtest/gtest.h>

#include "fake_cgroups.h"
#include "kiln/common/file.h"
#include "kiln/worker/build_runner.h"
#include "scripted_launcher.h"

namespace kiln::worker {
namespace {

using kiln::StepStatus;
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

using testing::exitWith;
using testing::output;
using testing::ScriptedLauncher;
using Step = testing::ScriptedStep;

class SupervisionTest : public ::testing::Test {
 protected:
  SupervisionTest() : storeDir_(root_.path()), launcher_(clock_) {
    request_.drv.name = "sup";
    request_.drv.builder = "/fake/builder";
    request_.drv.args = {"a", "b"};
    auto out = storeDir_.makeOutputPath(
        "out", hashString(HashAlgo::kSha256, "sup"), "sup");
    request_.drv.outputs["out"].path = out;
    request_.drv.env = {{"out", storeDir_.printPath(out)}};
    request_.drvPath = storeDir_.makeTextPath(
        "sup.drv", hashString(HashAlgo::kSha256, "x"), {});
    outPath_ = storeDir_.printPath(out);
  }

  BuildResult run(const CancelFlag* cancel = nullptr,
                  std::function<void(std::string_view)> extra = {}) {
    BuildRunnerConfig c;
    c.store = {storeDir_, storeDir_.dir(), false};
    c.buildDirParent = tmp_.path();
    c.cpuShares = cpuShares_;
    c.cgroups = cgroups_;
    if (dirSize_) c.dirSize = dirSize_;
    BuildRunner runner(c, launcher_, clock_);
    log_.clear();
    return runner.run(
        request_,
        [&](std::string_view d) {
          log_ += d;
          if (extra) extra(d);
        },
        cancel);
  }

  TempDir root_{"sup-store"};
  TempDir tmp_{"sup-tmp"};
  store::StoreDir storeDir_;
  FakeClock clock_;
  ScriptedLauncher launcher_;
  BuildRequest request_;
  std::shared_ptr<CpuShares> cpuShares_;
  std::shared_ptr<testing::FakeCgroups> cgroups_;
  std::shared_ptr<testing::FakeDirectorySize> dirSize_;
  std::string outPath_;
  std::string log_;
};

TEST_F(SupervisionTest, SuccessPassesArgv0EnvAndWorkDir) {
  launcher_.script = {output(seconds(1), "hello "), output(seconds(2), "world"),
                      exitWith(seconds(3), 0)};
  launcher_.filesToCreate = {outPath_};
  auto res = run();
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg;
  EXPECT_EQ(log_, "hello world");
  EXPECT_EQ(res.duration, seconds(3));
  EXPECT_EQ(launcher_.kills, 0);
  ASSERT_EQ(launcher_.specs.size(), 1u);
  auto& spec = launcher_.specs[0];
  EXPECT_EQ(spec.program, "/fake/builder");
  EXPECT_EQ(spec.args, (std::vector<std::string>{"builder", "a", "b"}));
  EXPECT_EQ(spec.workDir, spec.env.at("NIX_BUILD_TOP"));
  EXPECT_EQ(spec.umask, 022u);
  EXPECT_EQ(spec.env.at("out"), outPath_);
}

TEST_F(SupervisionTest, MaxSilentCountsFromTheLastOutput) {
  request_.limits.maxSilent = hours(1);
  launcher_.script = {output(seconds(10), "x"), output(seconds(3000), "y"),
                      exitWith(hours(10), 0)};
  auto res = run();
  EXPECT_EQ(res.status, StepStatus::kTimedOut);
  EXPECT_EQ(res.errorMsg, "build produced no output for 3600 s (maxSilent)");
  // Killed exactly one hour after the last output, not after the first.
  EXPECT_EQ(res.duration, seconds(3000) + hours(1));
  EXPECT_EQ(launcher_.kills, 1);
  EXPECT_EQ(log_, "xy");
  EXPECT_FALSE(pathExists(outPath_));
}

TEST_F(SupervisionTest, TotalTimeoutIsExact) {
  request_.limits.maxSilent = seconds(0);
  request_.limits.timeout = seconds(100);
  std::deque<Step> script;
  for (int i = 1; i < 200; ++i) script.push_back(output(seconds(i), "."));
  launcher_.script = script;
  auto res = run();
  EXPECT_EQ(res.status, StepStatus::kTimedOut);
  EXPECT_EQ(res.errorMsg, "build timed out after 100 s (total timeout)");
  EXPECT_EQ(res.duration, seconds(100));
  EXPECT_EQ(log_.size(), 100u);  // output at the deadline itself still counts
}

TEST_F(SupervisionTest, NoLimitsMeansNoKill) {
  request_.limits.maxSilent = seconds(0);
  request_.limits.timeout = seconds(0);
  launcher_.script = {exitWith(hours(10), 2)};
  auto res = run();
  EXPECT_EQ(res.status, StepStatus::kFailed);
  EXPECT_EQ(res.errorMsg, "builder for '" +
                              storeDir_.printPath(request_.drvPath) +
                              "' exited with code 2");
  EXPECT_EQ(res.duration, hours(10));
  EXPECT_EQ(launcher_.kills, 0);
}

TEST_F(SupervisionTest, LogLimitAcrossChunks) {
  request_.limits.logLimitBytes = 10;
  launcher_.script = {output(seconds(1), "123456"),
                      output(seconds(2), "7890ABC"), output(seconds(3), "more"),
                      exitWith(seconds(4), 0)};
  auto res = run();
  EXPECT_EQ(res.status, StepStatus::kLogLimitExceeded);
  EXPECT_EQ(log_, "1234567890");
  EXPECT_EQ(res.logBytes, 10u);
  EXPECT_EQ(res.duration, seconds(2));
}

TEST_F(SupervisionTest, LogExactlyAtTheLimitIsFine) {
  request_.limits.logLimitBytes = 4;
  launcher_.script = {output(seconds(1), "1234"), exitWith(seconds(2), 0)};
  launcher_.filesToCreate = {outPath_};
  EXPECT_EQ(run().status, StepStatus::kSuccess);
}

TEST_F(SupervisionTest, CancelIsNoticedWithinOnePollSlice) {
  CancelFlag cancel;
  launcher_.script = {output(seconds(5), "go"), exitWith(hours(10), 0)};
  Clock::TimePoint cancelledAt;
  auto res = run(&cancel, [&](std::string_view) {
    cancel.cancel();
    cancelledAt = clock_.now();
  });
  EXPECT_EQ(res.status, StepStatus::kCancelled);
  EXPECT_EQ(launcher_.kills, 1);
  EXPECT_EQ(res.duration, seconds(5));  // checked before waiting again
}

TEST_F(SupervisionTest, CancelledWhileSilent) {
  CancelFlag cancel;
  // Another thread cancels at t = 50 s, while the builder is silent.
  launcher_.script = {
      output(seconds(1), "x"),
      {seconds(50), {}, [&] { cancel.cancel(StepStatus::kAborted); }},
      exitWith(hours(10), 0)};
  auto res = run(&cancel);
  EXPECT_EQ(res.status, StepStatus::kAborted);
  EXPECT_EQ(res.errorMsg, "build aborted");
  EXPECT_GE(res.duration, seconds(50));
  EXPECT_LE(res.duration, seconds(50) + BuildRunner::kPollSlice);
  EXPECT_EQ(launcher_.kills, 1);
}

/// Records each session nice written.
class RecordingNice : public SessionNice {
 public:
  bool set(pid_t pid, int nice) override {
    writes.emplace_back(pid, nice);
    return true;
  }
  std::vector<std::pair<pid_t, int>> writes;
};

// The builder holds its rank's place in CpuShares from its start until it
// ends (before it is reaped): a higher rank takes the only core from a
// build already running, which gets it back afterwards.
TEST_F(SupervisionTest, TheBuilderTakesItsCpuShareWhileItRuns) {
  auto nice = std::make_shared<RecordingNice>();
  cpuShares_ = std::make_shared<CpuShares>(nice, 1);
  auto other = cpuShares_->started(1111, 2000);
  request_.rankMs = 3000;
  std::vector<std::pair<pid_t, int>> whileRunning;
  launcher_.script = {{seconds(1), {}, [&] { whileRunning = nice->writes; }},
                      exitWith(seconds(2), 0)};
  launcher_.filesToCreate = {outPath_};
  ASSERT_EQ(run().status, StepStatus::kSuccess);
  using P = std::pair<pid_t, int>;
  EXPECT_EQ(whileRunning, (std::vector<P>{{1111, kIdleShareNice}}));
  EXPECT_EQ(nice->writes,
            (std::vector<P>{{1111, kIdleShareNice}, {1111, kFullShareNice}}));
  cpuShares_->exited(other);
}

// Limits per build: the group is made before the builder starts, the
// builder joins it, a breach stops the build with its own status and says
// so in the log; the group goes after the build.
TEST_F(SupervisionTest, MemoryBreachEndsOutOfMemory) {
  cgroups_ = std::make_shared<testing::FakeCgroups>();
  request_.limits.resources.memoryMaxBytes = 100 << 20;
  request_.limits.resources.pidsMax = 50;
  launcher_.script = {
      {seconds(2), {}, [&] { cgroups_->state->usage.oomKills = 1; }},
      exitWith(hours(1), 0)};
  auto res = run();
  EXPECT_EQ(res.status, StepStatus::kOutOfMemory);
  EXPECT_EQ(res.errorMsg,
            "build ran out of memory: killed at its memory limit of 100M "
            "(--build-memory-max)");
  EXPECT_NE(log_.find("kiln: build ran out of memory"), std::string::npos);
  EXPECT_EQ(launcher_.kills, 1);
  EXPECT_GE(cgroups_->state->kills, 1);
  ASSERT_EQ(launcher_.specs.size(), 1u);
  EXPECT_EQ(launcher_.specs[0].cgroupProcs,
            std::vector<std::string>{"/fake/" + cgroups_->state->created[0] +
                                     "/cgroup.procs"});
  EXPECT_EQ(cgroups_->state->limits[0], (CgroupLimits{100 << 20, 50, 0}));
  EXPECT_EQ(cgroups_->state->destroyed, cgroups_->state->created);
}

TEST_F(SupervisionTest, BuilderKilledByTheKernelIsOutOfMemoryToo) {
  cgroups_ = std::make_shared<testing::FakeCgroups>();
  request_.limits.resources.memoryMaxBytes = 1 << 30;
  // The OOM killer took the builder itself: it exits before any poll.
  launcher_.script = {{seconds(1), {ProcessEvent::Kind::kExited, "", 9}, [&] {
                         cgroups_->state->usage.oomKills = 1;
                       }}};
  auto res = run();
  EXPECT_EQ(res.status, StepStatus::kOutOfMemory);
  EXPECT_NE(res.errorMsg.find("1G"), std::string::npos);
}

TEST_F(SupervisionTest, ProcessLimitReached) {
  cgroups_ = std::make_shared<testing::FakeCgroups>();
  request_.limits.resources.pidsMax = 64;
  launcher_.script = {
      {seconds(1), {}, [&] { cgroups_->state->usage.pidsMaxHits = 3; }},
      exitWith(hours(1), 0)};
  auto res = run();
  EXPECT_EQ(res.status, StepStatus::kProcessLimitExceeded);
  EXPECT_EQ(res.errorMsg,
            "build reached its process limit of 64 processes and threads "
            "(--build-pids-max)");
}

TEST_F(SupervisionTest, DiskLimitCheckedEverySecond) {
  dirSize_ = std::make_shared<testing::FakeDirectorySize>();
  request_.limits.resources.diskMaxBytes = 20 << 20;
  launcher_.script = {
      {milliseconds(4500), {}, [&] { dirSize_->bytes = 21 << 20; }},
      exitWith(hours(1), 0)};
  auto res = run();
  EXPECT_EQ(res.status, StepStatus::kDiskLimitExceeded);
  EXPECT_EQ(res.errorMsg,
            "build directory grew past its limit of 20M (--build-disk-max): "
            "21M or more");
  EXPECT_EQ(res.duration, seconds(5));  // the next check after the growth
  EXPECT_EQ(res.usage.buildDirBytes, 21u << 20);
}

TEST_F(SupervisionTest, UsageIsReportedOnSuccess) {
  cgroups_ = std::make_shared<testing::FakeCgroups>();
  dirSize_ = std::make_shared<testing::FakeDirectorySize>();
  dirSize_->bytes = 4096;
  cgroups_->state->usage = {123 << 20, 4500000, 0, 0};
  launcher_.script = {exitWith(seconds(3), 0)};
  launcher_.filesToCreate = {outPath_};
  auto res = run();
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg;
  EXPECT_EQ(res.usage, (BuildUsage{123 << 20, 4500000, 4096}));
  EXPECT_EQ(dirSize_->calls, 1);  // no disk limit: measured once, at the end
}

TEST_F(SupervisionTest, LimitsWithoutControlGroupsAreRefused) {
  request_.limits.resources.memoryMaxBytes = 1 << 30;
  EXPECT_THROW(run(), Error);
}

}  // namespace
}  // namespace kiln::worker
