// CPU shares of concurrent builders (cpu_shares.h): the policy, its
// bookkeeping against a fake SessionNice, and the /proc writer against a
// /proc of its own.
#include "kiln/worker/cpu_shares.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "kiln/common/file.h"
#include "kiln/common/process.h"

namespace kiln::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

constexpr int kFull = kFullShareNice;
constexpr int kIdle = kIdleShareNice;

/// Records every write; refuses those for pids in `refuse`.
class FakeNice : public SessionNice {
 public:
  bool set(pid_t pid, int nice) override {
    if (refuse.count(pid)) return false;
    writes.emplace_back(pid, nice);
    return true;
  }
  std::vector<std::pair<pid_t, int>> writes;
  std::set<pid_t> refuse;
};

TEST(ShareNices, TheHighestRanksGetTheCores) {
  EXPECT_THAT(shareNices({{3000, 1}, {1000, 2}, {4000, 3}, {2000, 4}}, 2),
              ElementsAre(kFull, kIdle, kFull, kIdle));
  // Fewer builders than cores: all get full shares.
  EXPECT_THAT(shareNices({{5, 1}, {7, 2}}, 4), ElementsAre(kFull, kFull));
  EXPECT_TRUE(shareNices({}, 2).empty());
}

TEST(ShareNices, AmongEqualRanksTheEarlierStartedGoesFirst) {
  EXPECT_THAT(shareNices({{1000, 9}, {1000, 3}, {1000, 5}}, 1),
              ElementsAre(kIdle, kFull, kIdle));
  // Zero cores count as one.
  EXPECT_THAT(shareNices({{1, 2}, {2, 1}}, 0), ElementsAre(kIdle, kFull));
}

TEST(CpuShares, ReranksOnEveryStartAndEndWritingOnlyChanges) {
  auto fake = std::make_shared<FakeNice>();
  CpuShares shares(fake, 2);
  auto a = shares.started(101, 3000);
  auto b = shares.started(102, 2000);
  EXPECT_TRUE(fake->writes.empty()) << "two builders on two cores";
  auto c = shares.started(103, 1000);  // lowest: idles
  EXPECT_THAT(fake->writes, ElementsAre(Pair(103, kIdle)));
  auto d = shares.started(104, 4000);  // highest: pushes 102 out
  EXPECT_THAT(fake->writes, ElementsAre(Pair(103, kIdle), Pair(102, kIdle)));
  fake->writes.clear();
  shares.exited(a);  // 102 (next rank) gets a core back, 103 stays idle
  EXPECT_THAT(fake->writes, ElementsAre(Pair(102, kFull)));
  fake->writes.clear();
  shares.exited(d);
  shares.exited(d);  // unknown by now: ignored
  EXPECT_THAT(fake->writes, ElementsAre(Pair(103, kFull)));
  shares.exited(b);
  shares.exited(c);
  EXPECT_EQ(fake->writes.size(), 1u);
}

TEST(CpuShares, ARefusedWriteIsTriedAgainAtTheNextChange) {
  auto fake = std::make_shared<FakeNice>();
  CpuShares shares(fake, 1);
  fake->refuse = {202};
  shares.started(201, 500);
  auto second = shares.started(202, 100);  // should idle: refused
  EXPECT_TRUE(fake->writes.empty());
  fake->refuse.clear();
  auto third = shares.started(203, 50);
  EXPECT_THAT(fake->writes, ElementsAre(Pair(202, kIdle), Pair(203, kIdle)));
  shares.exited(third);
  shares.exited(second);
  EXPECT_EQ(fake->writes.size(), 2u) << "leaving changes nobody's share";
}

TEST(CpuShares, AHoldLeavesOnReleaseOrDestruction) {
  auto fake = std::make_shared<FakeNice>();
  CpuShares shares(fake, 1);
  auto low = shares.started(301, 10);
  {
    CpuShareHold hold(&shares, 302, 20);
    EXPECT_THAT(fake->writes, ElementsAre(Pair(301, kIdle)));
  }
  EXPECT_THAT(fake->writes, ElementsAre(Pair(301, kIdle), Pair(301, kFull)));
  CpuShareHold hold(&shares, 303, 30);
  hold.release();
  hold.release();
  EXPECT_EQ(fake->writes.size(), 4u);
  shares.exited(low);
  CpuShareHold none(nullptr, 304, 40);  // no CpuShares: holds nothing
  none.release();
}

/// A /proc of its own: the autogroup switch and one file per pid.
class ProcAutogroupTest : public ::testing::Test {
 protected:
  void enable(const std::string& value) {
    createDirs(proc_.path() + "/sys/kernel");
    writeFile(proc_.path() + "/sys/kernel/sched_autogroup_enabled", value);
  }
  std::string fileOf(pid_t pid) {
    std::string dir = proc_.path() + "/" + std::to_string(pid);
    createDirs(dir);
    writeFile(dir + "/autogroup", "");
    return dir + "/autogroup";
  }
  TempDir proc_{"fake-proc"};
};

TEST_F(ProcAutogroupTest, OffWhenAutogroupsAreMissingOrDisabled) {
  EXPECT_EQ(procAutogroupNice(proc_.path()), nullptr);
  enable("0\n");
  EXPECT_EQ(procAutogroupNice(proc_.path()), nullptr);
  enable("1\n");
  EXPECT_NE(procAutogroupNice(proc_.path()), nullptr);
}

TEST_F(ProcAutogroupTest, WritesOnlyForASessionLeader) {
  enable("1\n");
  auto nice = procAutogroupNice(proc_.path());
  ASSERT_NE(nice, nullptr);
  // Process children lead sessions of their own (setsid), as builders do.
  ProcessSpec spec;
  spec.program = "/bin/sleep";
  spec.args = {"sleep", "600"};
  Process leader(spec);
  auto file = fileOf(leader.pid());
  EXPECT_TRUE(nice->set(leader.pid(), 19));
  EXPECT_EQ(readFile(file), "19");
  EXPECT_TRUE(nice->set(leader.pid(), 0));
  EXPECT_EQ(readFile(file), "0");
  leader.killTree();
  // A child still in this process's session: refused, nothing written.
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  auto childFile = fileOf(child);
  EXPECT_FALSE(nice->set(child, 19));
  EXPECT_EQ(readFile(childFile), "");
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  // No autogroup file (the kernel has none for it): refused.
  Process other(spec);
  EXPECT_FALSE(nice->set(other.pid(), 19));
  other.killTree();
}

}  // namespace
}  // namespace kiln::worker
