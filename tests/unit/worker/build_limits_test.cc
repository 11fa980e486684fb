// Limits per build on this host's real control groups (v1 here, v2 on
// Debian 12): a memory bomb, a fork bomb and a disk fill, each beside a
// neighbour build on the same runner that succeeds, then the next build.
// The limits are in place before anything runs and every bomb is bounded
// on its own (400 MB, 400 processes, 60 MB), so a failure cannot hurt the
// machine. Skipped where the worker may not make control groups.
#include <gtest/gtest.h>

#include <thread>

#include "kiln/common/file.h"
#include "kiln/worker/build_runner.h"
#include "kiln/worker/cgroups.h"
#include "sandbox_fixture.h"

namespace kiln::worker {
namespace {

using kiln::StepStatus;

class BuildLimitsTest : public ::testing::Test {
 protected:
  BuildLimitsTest() : storeDir_(root_.path() + "/store") {
    createDirs(storeDir_.dir());
    createDirs(root_.path() + "/tmp");
  }
  void SetUp() override {
    std::string why;
    groups_ = hostCgroups(false, why);
    if (!groups_) GTEST_SKIP() << "no control groups here: " << why;
    BuildRunnerConfig c;
    c.store = {storeDir_, storeDir_.dir(), false};
    c.buildDirParent = root_.path() + "/tmp";
    c.impureEnv = {};
    c.cgroups = groups_;
    runner_ =
        std::make_unique<BuildRunner>(c, launcher_, RealClock::instance());
  }

  /// Unsandboxed: the host's tools, through PATH.
  BuildRequest request(const std::string& name, const std::string& script) {
    return sbtest::shellRequest(storeDir_, name,
                                "PATH=/usr/bin:/bin; " + script);
  }
  BuildResult build(const BuildRequest& r, std::string* log = nullptr) {
    return runner_->run(r, [&](std::string_view c) {
      if (log) log->append(c);
    });
  }
  /// Builds `bomb` while a neighbour builds beside it on the same runner;
  /// the neighbour succeeds, and so does the next build after both.
  BuildResult besideNeighbour(const BuildRequest& bomb, std::string& log) {
    BuildResult neighbour;
    std::thread t([&] {
      neighbour = build(request("neighbour",
                                "i=0; while [ $i -lt 20000 ]; do "
                                "i=$((i+1)); done; echo $i > $out"));
    });
    auto res = build(bomb, &log);
    t.join();
    EXPECT_EQ(neighbour.status, StepStatus::kSuccess) << neighbour.errorMsg;
    auto next = build(request("next", "echo next > $out"));
    EXPECT_EQ(next.status, StepStatus::kSuccess) << next.errorMsg;
    return res;
  }

  TempDir root_{"limits-test"};
  store::StoreDir storeDir_;
  RealProcessLauncher launcher_;
  std::shared_ptr<Cgroups> groups_;
  std::unique_ptr<BuildRunner> runner_;
};

TEST_F(BuildLimitsTest, EveryProcessRunsInTheBuildsGroup) {
  auto r = request("where", "(cat /proc/self/cgroup) > $out");
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg;
  auto text = readFile(res.outputs.at(0).physicalPath);
  EXPECT_NE(text.find("memory:"), std::string::npos) << text;
  EXPECT_NE(text.find("/kiln-build-"), std::string::npos) << text;
  EXPECT_GT(res.usage.cpuTimeUs, 0u);
  EXPECT_GT(res.usage.peakMemoryBytes, 0u);
  deletePath(res.outputs.at(0).physicalPath);
}

TEST_F(BuildLimitsTest, MemoryBombEndsOutOfMemory) {
  // dash holds a command substitution's output in memory: 400 MB here.
  auto r = request("membomb",
                   "x=$(head -c 400000000 /dev/zero | tr '\\000' a); "
                   "echo survived > $out");
  r.limits.resources.memoryMaxBytes = 100 << 20;
  std::string log;
  auto res = besideNeighbour(r, log);
  EXPECT_EQ(res.status, StepStatus::kOutOfMemory) << res.errorMsg;
  EXPECT_NE(res.errorMsg.find("memory limit of 100M"), std::string::npos);
  EXPECT_NE(log.find("kiln: build ran out of memory"), std::string::npos)
      << log;
  EXPECT_LE(res.usage.peakMemoryBytes, uint64_t{100} << 20);
  EXPECT_GT(res.usage.peakMemoryBytes, uint64_t{50} << 20);
}

TEST_F(BuildLimitsTest, ForkBombReachesTheProcessLimit) {
  auto r = request("forkbomb",
                   "i=0; while [ $i -lt 400 ]; do sleep 30 & i=$((i+1)); "
                   "done; wait; echo survived > $out");
  r.limits.resources.pidsMax = 32;
  std::string log;
  auto res = besideNeighbour(r, log);
  EXPECT_EQ(res.status, StepStatus::kProcessLimitExceeded) << res.errorMsg;
  EXPECT_NE(res.errorMsg.find("process limit of 32"), std::string::npos);
  EXPECT_NE(log.find("kiln: build reached its process limit"),
            std::string::npos);
}

TEST_F(BuildLimitsTest, DiskFillPastTheBuildDirectoryLimit) {
  auto r = request("diskfill",
                   "i=0; while [ $i -lt 60 ]; do "
                   "head -c 1048576 /dev/zero >> fill; i=$((i+1)); done; "
                   "sleep 5; echo survived > $out");
  r.limits.resources.diskMaxBytes = 20 << 20;
  std::string log;
  auto res = besideNeighbour(r, log);
  EXPECT_EQ(res.status, StepStatus::kDiskLimitExceeded) << res.errorMsg;
  EXPECT_NE(res.errorMsg.find("limit of 20M"), std::string::npos);
  EXPECT_GT(res.usage.buildDirBytes, uint64_t{20} << 20);
}

/// The builder's groups, with shell builtins only.
constexpr const char* kCatGroups =
    "while read -r l; do echo \"$l\"; done < /proc/self/cgroup > $out";

// The sandbox plugins put the builder in the group before it runs (ABI
// 1.5's cgroup_procs): inside the linux sandbox's namespaces, and with
// the none sandbox.
class SandboxLimitsTest : public sbtest::SandboxTest {
 protected:
  void SetUp() override {
    sbtest::SandboxTest::SetUp();
    if (IsSkipped()) return;
    std::string why;
    cgroups_ = hostCgroups(false, why);
    if (!cgroups_) GTEST_SKIP() << "no control groups here: " << why;
  }
};

TEST_F(SandboxLimitsTest, LinuxSandboxBuildRunsInItsGroup) {
  auto r = request("where", kCatGroups);
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg << log_;
  auto text = readFile(physical(res.outputs.at(0).path));
  EXPECT_NE(text.find("/kiln-build-"), std::string::npos) << text;
}

TEST_F(SandboxLimitsTest, LinuxSandboxMemoryBomb) {
  // The shell alone (the sandbox has only /bin/sh): a string doubled up
  // to 256 MB.
  auto r = request("membomb",
                   "x=a; i=0; while [ $i -lt 28 ]; do x=\"$x$x\"; "
                   "i=$((i+1)); done; echo survived > $out");
  r.limits.resources.memoryMaxBytes = 100 << 20;
  auto res = build(r);
  EXPECT_EQ(res.status, StepStatus::kOutOfMemory) << res.errorMsg << log_;
}

TEST_F(SandboxLimitsTest, NoneSandboxBuildRunsInItsGroup) {
  sandbox_ = sbtest::loadTestSandbox("none");
  // none does not map the store: the physical store must be the logical.
  logical_ = store::StoreDir(physicalDir_);
  auto r = request("where", kCatGroups);
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg << log_;
  auto text = readFile(physical(res.outputs.at(0).path));
  EXPECT_NE(text.find("/kiln-build-"), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln::worker
