// The control groups of builds, v1 and v2, over a fake file system
// (tests/support/fake_cgroups.h); the real ones are in build_limits_test.
#include "kiln/worker/cgroups.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

#include "fake_cgroups.h"
#include "kiln/worker/limit_watch.h"

namespace kiln::worker {
namespace {

using kiln::testing::FakeCgroupSystem;

// The layout of this project's test machines: v1 controllers, memory in a
// group of its own, an empty v2 mount.
constexpr const char* kV1Mounts =
    "30 25 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
    "31 25 0:27 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
    "32 25 0:28 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"
    "33 25 0:29 / /sys/fs/cgroup/cpu rw shared:9 - cgroup cgroup rw,cpu\n"
    "34 25 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n"
    "35 25 8:1 / / rw - ext4 /dev/sda1 rw\n";
constexpr const char* kV1Self =
    "8:pids:/\n4:memory:/job/7\n2:cpuacct:/\n1:cpu:/\n0::/\n";

// Debian 12: pure v2, the worker in its delegated service group.
constexpr const char* kV2Mounts =
    "25 30 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
constexpr const char* kV2Self = "0::/system.slice/kiln-worker.service\n";
constexpr const char* kV2Root =
    "/sys/fs/cgroup/system.slice/kiln-worker.service";

bool wrote(const FakeCgroupSystem& fs, const std::string& entry) {
  return std::find(fs.writes.begin(), fs.writes.end(), entry) !=
         fs.writes.end();
}

TEST(CgroupsTest, V1GroupInEveryHierarchyWithItsLimits) {
  auto fs = std::make_shared<FakeCgroupSystem>();
  std::string why;
  auto groups = detectCgroups(fs, kV1Mounts, kV1Self, false, why);
  ASSERT_TRUE(groups) << why;
  EXPECT_EQ(groups->describe(),
            "cgroup v1 at /sys/fs/cgroup/memory/job/7 and /sys/fs/cgroup/pids");
  {
    auto g = groups->create("b1", {100 << 20, 64, 0});
    // cpuacct (a hierarchy of its own) measures; cpu is left alone
    // without a weight, so autogroup CPU shares keep working.
    EXPECT_EQ(
        g->procsFiles(),
        (std::vector<std::string>{"/sys/fs/cgroup/memory/job/7/b1/cgroup.procs",
                                  "/sys/fs/cgroup/pids/b1/cgroup.procs",
                                  "/sys/fs/cgroup/cpuacct/b1/cgroup.procs"}));
    EXPECT_TRUE(wrote(*fs,
                      "/sys/fs/cgroup/memory/job/7/b1/"
                      "memory.limit_in_bytes=104857600"));
    EXPECT_TRUE(wrote(*fs, "/sys/fs/cgroup/pids/b1/pids.max=64"));
    fs->files["/sys/fs/cgroup/memory/job/7/b1/memory.oom_control"] =
        "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
    fs->files["/sys/fs/cgroup/memory/job/7/b1/memory.max_usage_in_bytes"] =
        "104857600\n";
    fs->files["/sys/fs/cgroup/pids/b1/pids.events"] = "max 5\n";
    fs->files["/sys/fs/cgroup/cpuacct/b1/cpuacct.usage"] = "2500000000\n";
    auto u = g->usage();
    EXPECT_EQ(u.oomKills, 2u);
    EXPECT_EQ(u.pidsMaxHits, 5u);
    EXPECT_EQ(u.memoryPeakBytes, 104857600u);
    EXPECT_EQ(u.cpuTimeUs, 2500000u);
    fs->files["/sys/fs/cgroup/pids/b1/cgroup.procs"] = "11\n12\n";
    fs->busyRemovals = 1;  // a process still exiting: killed, tried again
  }
  EXPECT_EQ(fs->killed, (std::vector<pid_t>{11, 12, 11, 12}));
  EXPECT_EQ(fs->pauses, 1);
  EXPECT_TRUE(fs->dirs.empty());
}

TEST(CgroupsTest, V1CpuWeightBecomesShares) {
  auto fs = std::make_shared<FakeCgroupSystem>();
  std::string why;
  auto groups = detectCgroups(fs, kV1Mounts, kV1Self, true, why);
  ASSERT_TRUE(groups) << why;
  auto g = groups->create("b2", {0, 0, 50});
  EXPECT_TRUE(wrote(*fs, "/sys/fs/cgroup/cpu/b2/cpu.shares=512"));
  EXPECT_EQ(g->procsFiles().size(), 4u);
}

TEST(CgroupsTest, V2MovesTheWorkerToALeafAndDelegatesControllers) {
  auto fs = std::make_shared<FakeCgroupSystem>();
  std::string root = kV2Root;
  fs->files[root + "/cgroup.controllers"] = "cpuset cpu io memory pids\n";
  fs->files[root + "/cgroup.subtree_control"] = "";
  fs->files[root + "/cgroup.procs"] = "4242\n4243\n";
  std::string why;
  auto groups = detectCgroups(fs, kV2Mounts, kV2Self, true, why);
  ASSERT_TRUE(groups) << why;
  EXPECT_EQ(groups->describe(), "cgroup v2 at " + root);
  EXPECT_TRUE(wrote(*fs, root + "/kiln-worker/cgroup.procs=4242"));
  EXPECT_TRUE(wrote(*fs, root + "/kiln-worker/cgroup.procs=4243"));
  EXPECT_TRUE(wrote(*fs, root + "/cgroup.subtree_control=+memory +pids +cpu"));

  std::string dir = root + "/b3";
  fs->files[dir + "/memory.swap.max"] = "max";
  fs->files[dir + "/memory.oom.group"] = "0";
  {
    auto g = groups->create("b3", {2ull << 30, 1000, 200});
    EXPECT_EQ(g->procsFiles(), std::vector<std::string>{dir + "/cgroup.procs"});
    EXPECT_TRUE(wrote(*fs, dir + "/memory.max=2147483648"));
    EXPECT_TRUE(wrote(*fs, dir + "/memory.swap.max=0"));
    EXPECT_TRUE(wrote(*fs, dir + "/memory.oom.group=1"));
    EXPECT_TRUE(wrote(*fs, dir + "/pids.max=1000"));
    EXPECT_TRUE(wrote(*fs, dir + "/cpu.weight=200"));
    fs->files[dir + "/memory.events"] =
        "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 1\n";
    fs->files[dir + "/memory.peak"] = "2147483648\n";
    fs->files[dir + "/cpu.stat"] = "usage_usec 1234\nuser_usec 1000\n";
    auto u = g->usage();
    EXPECT_EQ(u.oomKills, 1u);
    EXPECT_EQ(u.pidsMaxHits, 0u);  // no pids.events
    EXPECT_EQ(u.memoryPeakBytes, 2147483648u);
    EXPECT_EQ(u.cpuTimeUs, 1234u);
  }
  EXPECT_TRUE(wrote(*fs, dir + "/cgroup.kill=1"));
  EXPECT_EQ(fs->removed, std::vector<std::string>{dir});
}

TEST(CgroupsTest, V2AlreadyDelegatedLeavesTheWorkerWhereItIs) {
  auto fs = std::make_shared<FakeCgroupSystem>();
  std::string root = kV2Root;
  fs->files[root + "/cgroup.controllers"] = "memory pids\n";
  fs->files[root + "/cgroup.subtree_control"] = "memory pids\n";
  std::string why;
  ASSERT_TRUE(detectCgroups(fs, kV2Mounts, kV2Self, false, why)) << why;
  EXPECT_TRUE(fs->writes.empty());
}

TEST(CgroupsTest, V2WithoutKillFileKillsEachProcess) {
  auto fs = std::make_shared<FakeCgroupSystem>();
  std::string root = kV2Root;
  fs->files[root + "/cgroup.controllers"] = "memory pids\n";
  fs->files[root + "/cgroup.subtree_control"] = "memory pids";
  std::string why;
  auto groups = detectCgroups(fs, kV2Mounts, kV2Self, false, why);
  ASSERT_TRUE(groups);
  auto g = groups->create("b4", {});
  fs->failWrites.insert(root + "/b4/cgroup.kill");  // before Linux 5.14
  fs->files[root + "/b4/cgroup.procs"] = "77\n";
  g->killAll();
  EXPECT_EQ(fs->killed, std::vector<pid_t>{77});
}

TEST(CgroupsTest, EmptyV2MountFallsBackToV1) {
  auto fs = std::make_shared<FakeCgroupSystem>();
  fs->files["/sys/fs/cgroup/unified/cgroup.controllers"] = "hugetlb\n";
  std::string why;
  auto groups = detectCgroups(fs, kV1Mounts, kV1Self, false, why);
  ASSERT_TRUE(groups);
  EXPECT_EQ(groups->describe().substr(0, 9), "cgroup v1");
}

TEST(CgroupsTest, NoUsableControllersSaysWhy) {
  auto fs = std::make_shared<FakeCgroupSystem>();
  fs->files["/sys/fs/cgroup/cgroup.controllers"] = "cpu io\n";
  std::string why;
  EXPECT_FALSE(detectCgroups(fs, kV2Mounts, kV2Self, false, why));
  EXPECT_NE(why.find("memory and pids"), std::string::npos) << why;
}

TEST(CgroupsTest, SweepRemovesTheGroupsOfWorkersThatAreGone) {
  auto fs = std::make_shared<FakeCgroupSystem>();
  std::string why;
  auto groups = detectCgroups(fs, kV1Mounts, kV1Self, false, why);
  ASSERT_TRUE(groups);
  std::string mine = "kiln-build-" + std::to_string(::getpid()) + "-1";
  for (auto name : {"kiln-build-999999-3", "kiln-build-4242-1", mine.c_str(),
                    "someone-else"}) {
    fs->dirs.insert(std::string("/sys/fs/cgroup/pids/") + name);
    fs->dirs.insert(std::string("/sys/fs/cgroup/memory/job/7/") + name);
  }
  fs->alive = {4242};
  fs->files["/sys/fs/cgroup/pids/kiln-build-999999-3/cgroup.procs"] = "55\n";
  EXPECT_EQ(groups->sweep(), 1u);
  EXPECT_FALSE(fs->dirs.count("/sys/fs/cgroup/pids/kiln-build-999999-3"));
  EXPECT_FALSE(
      fs->dirs.count("/sys/fs/cgroup/memory/job/7/kiln-build-999999-3"));
  EXPECT_EQ(fs->killed, std::vector<pid_t>{55});
  EXPECT_EQ(fs->dirs.size(), 6u);  // the live worker's, ours, someone's
}

TEST(CgroupsTest, BigParallelBuildsGetTheBigLimits) {
  ResourceLimits normal{1 << 30, 512, 0, 1 << 30};
  ResourceLimits big{uint64_t{16} << 30, 0, 0, 0};
  store::Derivation drv;
  EXPECT_EQ(limitsFor(normal, big, drv), normal);
  drv.env["requiredSystemFeatures"] = "kvm big-parallel";
  EXPECT_EQ(limitsFor(normal, big, drv),
            (ResourceLimits{uint64_t{16} << 30, 512, 0, 1 << 30}));
  EXPECT_EQ(limitsFor(normal, std::nullopt, drv), normal);
  drv.env["requiredSystemFeatures"] = "big-parallelism";
  EXPECT_EQ(limitsFor(normal, big, drv), normal);
}

TEST(CgroupsTest, NamesAreUniquePerProcess) {
  auto a = nextCgroupName(), b = nextCgroupName();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("kiln-build-", 0), 0u);
}

}  // namespace
}  // namespace kiln::worker
