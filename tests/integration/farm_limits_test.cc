// Issue 33's probes on a real farm: `kiln worker` in its default linux
// sandbox with limits per build (100M memory, 64 processes, 20M build
// directory) and two slots builds a memory bomb, a fork bomb and a disk
// fill beside neighbour builds. Each bomb ends with its own status and
// message; the neighbours succeed; the worker stays up and builds the next
// evaluation's step. The memory bomb is tried a second time before it
// fails (out of memory is retried once). Every bomb is bounded on its own (400
// MB, 400 processes, 60 MB) in case a limit failed, and the limits are in place
// before any builder runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <iostream>
#include <map>
#include <string>

#include "farm.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr const char* kProbes = R"({
  membomb = mk "membomb" "x=$(head -c 400000000 /dev/zero | tr '\\000' a); echo survived > $out" [];
  forkbomb = mk "forkbomb" "i=0; while [ $i -lt 400 ]; do sleep 30 & i=$((i+1)); done; wait; echo survived > $out" [];
  diskfill = mk "diskfill" "i=0; while [ $i -lt 60 ]; do head -c 1048576 /dev/zero >> $TMPDIR/fill; i=$((i+1)); done; sleep 5; echo survived > $out" [];
  n1 = mk "n1" "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; echo $i > $out" [];
  n2 = mk "n2" "i=0; while [ $i -lt 100001 ]; do i=$((i+1)); done; echo $i > $out" [];
  n3 = mk "n3" "i=0; while [ $i -lt 100002 ]; do i=$((i+1)); done; echo $i > $out" [];
})";

TEST(FarmLimits, BombsEndWithTheirOwnStatusBesideNeighbours) {
  std::string why;
  if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
  if (::geteuid() != 0) GTEST_SKIP() << "control groups need root here";
  test::FarmOptions options;
  options.schedulerArgs = {"--retry-backoff-ms", "100"};
  test::Farm farm(options);
  auto probes = farm.writeCollection("probes", kProbes);
  auto next = farm.writeCollection(
      "next", "{ next = mk \"next\" \"echo next > $out\" []; }");
  farm.startScheduler();
  auto worker = test::WorkerOptions::withSlots(2);
  worker.extraArgs = {"--build-memory-max", "100M", "--build-pids-max", "64",
                      "--build-disk-max",   "20M"};
  if (auto skip = farm.addSandboxedWorker(worker); !skip.empty())
    GTEST_SKIP() << skip;
  ASSERT_THAT(farm.worker(0).log(), HasSubstr("one control group per build"));
  farm.createJobset("p", "probes", probes);
  int64_t eval = farm.evaluate("p", "probes");
  ASSERT_TRUE(farm.waitForBuilds(eval, 180s)) << farm.worker(0).log();
  std::map<std::string, scheduler::BuildRow> byJob;
  for (auto& b : farm.builds(eval)) byJob[b.job] = b;
  EXPECT_EQ(byJob["membomb"].status, 13) << byJob["membomb"].error;
  EXPECT_EQ(byJob["forkbomb"].status, 14) << byJob["forkbomb"].error;
  EXPECT_EQ(byJob["diskfill"].status, 15) << byJob["diskfill"].error;
  for (auto n : {"n1", "n2", "n3"})
    EXPECT_EQ(byJob[n].status, 0) << n << ": " << byJob[n].error;
  // Which limit, at what value: the step's error (the build page shows
  // it), and what each used.
  std::map<std::string, std::string> errors;
  for (auto& s : farm.steps()) {
    for (auto name : {"membomb", "forkbomb", "diskfill", "n1"})
      if (s.drvPath.find(std::string("-") + name + ".drv") !=
          std::string::npos) {
        errors[name] = s.error;
        // Out of memory is tried once more (the one worker here runs out
        // again); the other limits are not retried.
        EXPECT_EQ(s.attempts, std::string(name) == "membomb" ? 2 : 1) << name;
        std::cout << name << ": status " << s.status << ", peak memory "
                  << s.peakMemoryBytes << " B, CPU " << s.cpuTimeUs
                  << " us, build dir " << s.buildDirBytes << " B, "
                  << (s.stopMs - s.startMs) << " ms\n";
        if (std::string(name) == "n1") {
          EXPECT_GT(s.cpuTimeUs, 0);
        }
      }
  }
  EXPECT_THAT(errors["membomb"], HasSubstr("memory limit of 100M"));
  EXPECT_THAT(errors["forkbomb"], HasSubstr("process limit of 64"));
  EXPECT_THAT(errors["diskfill"], HasSubstr("limit of 20M"));
  // The worker is still up and takes the next step.
  ASSERT_TRUE(farm.worker(0).running()) << farm.worker(0).log();
  farm.createJobset("p", "next", next);
  int64_t eval2 = farm.evaluate("p", "next");
  ASSERT_TRUE(farm.waitForBuilds(eval2, 60s)) << farm.worker(0).log();
  for (auto& b : farm.builds(eval2)) EXPECT_EQ(b.status, 0) << b.error;
  auto m = farm.metricsText();
  EXPECT_THAT(m, HasSubstr("kiln_step_peak_memory_bytes_count"));
  EXPECT_EQ(farm.stopWorker(0), 0);
  EXPECT_EQ(farm.stopScheduler(), 0);
}

// A build setting a setuid bit (coreutils' chmod u+s) and one setting an
// extended attribute (the sandbox probe's setxattr) fail under the linux
// sandbox's system-call filter, each beside a neighbour that succeeds; the
// worker stays up.
TEST(FarmLimits, SetuidAndXattrProbesFailBesideANeighbour) {
  std::string why;
  if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
  std::string probe =
      test::binaryDir() + "/tests/unit/worker/kiln_sandbox_probe";
  if (!pathExists(probe)) GTEST_SKIP() << "no " << probe;
  test::Farm farm;
  auto probes = farm.writeCollection(
      "probes",
      "{ setuid = mk \"setuid\" \": > $TMPDIR/f; chmod u+s $TMPDIR/f && "
      "echo escaped > $out\" [];\n"
      "  xattr = mk \"xattr\" \": > $TMPDIR/f; /probe xattr $TMPDIR/f && "
      "echo escaped > $out\" [];\n"
      "  n1 = mk \"n1\" \"i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; "
      "echo $i > $out\" []; }");
  auto next = farm.writeCollection(
      "next", "{ next = mk \"next\" \"echo next > $out\" []; }");
  farm.startScheduler();
  auto worker = test::WorkerOptions::withSlots(2);
  worker.extraArgs = {
      "--sandbox-option",
      "extra-paths=/bin /usr/bin /lib /lib64? /usr/lib /probe=" + probe};
  if (auto skip = farm.addSandboxedWorker(worker); !skip.empty())
    GTEST_SKIP() << skip;
  farm.createJobset("p", "probes", probes);
  int64_t eval = farm.evaluate("p", "probes");
  ASSERT_TRUE(farm.waitForBuilds(eval, 120s)) << farm.worker(0).log();
  std::map<std::string, scheduler::BuildRow> byJob;
  for (auto& b : farm.builds(eval)) byJob[b.job] = b;
  EXPECT_EQ(byJob["setuid"].status, 1) << byJob["setuid"].error;
  EXPECT_EQ(byJob["xattr"].status, 1) << byJob["xattr"].error;
  EXPECT_EQ(byJob["n1"].status, 0) << byJob["n1"].error;
  // Why, in each build's log: the filter's errors (EPERM for the mode,
  // ENOTSUP for the attribute, as Nix's filter answers).
  auto setuidLog = farm.kiln({"log", byJob["setuid"].drvPath}).out;
  EXPECT_THAT(setuidLog, HasSubstr("Operation not permitted")) << setuidLog;
  auto xattrLog = farm.kiln({"log", byJob["xattr"].drvPath}).out;
  EXPECT_THAT(xattrLog, HasSubstr("blocked: xattr")) << xattrLog;
  EXPECT_THAT(xattrLog, HasSubstr("Operation not supported")) << xattrLog;
  // The worker is still up and takes the next step.
  ASSERT_TRUE(farm.worker(0).running()) << farm.worker(0).log();
  farm.createJobset("p", "next", next);
  int64_t eval2 = farm.evaluate("p", "next");
  ASSERT_TRUE(farm.waitForBuilds(eval2, 60s)) << farm.worker(0).log();
  for (auto& b : farm.builds(eval2)) EXPECT_EQ(b.status, 0) << b.error;
  EXPECT_EQ(farm.stopWorker(0), 0);
  EXPECT_EQ(farm.stopScheduler(), 0);
}

}  // namespace
}  // namespace kiln
