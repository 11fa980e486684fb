// Platforms and system features end to end (docs/worker.md, "Platforms"):
// a worker announces what its platform plugins run here, and the scheduler
// sends a step only to a worker announcing its system and its
// requiredSystemFeatures. The aarch64-linux builder is a static program
// cross-compiled here, a source path of the collection, built on this
// x86_64 host under qemu-user.
#include <gtest/gtest.h>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln/store/local_store.h"
#include "test_support.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;

TEST(FarmPlatforms, StepsGoOnlyToWorkersWithTheirSystemAndFeatures) {
  KILN_SKIP_UNLESS_FARM_CAN_RUN();
  if (!pathExists("/usr/bin/qemu-aarch64-static"))
    GTEST_SKIP() << "qemu-user-static missing (scripts/install-deps.sh)";
  test::Farm farm;
  std::string coll = farm.dir() + "/coll";
  createDirs(coll);
  auto why = test::crossCompileAarch64(
      test::sourceDir() + "/tests/support/emulated_builder.c",
      coll + "/builder-aarch64");
  if (!why.empty()) GTEST_SKIP() << why;
  writeFile(coll + "/default.nix", R"({
  arm = derivation {
    name = "arm"; system = "aarch64-linux";
    builder = ./builder-aarch64; args = [ "hello" ];
  };
  big = derivation {
    name = "big"; system = "x86_64-linux"; builder = "/bin/sh";
    args = [ "-c" "echo big > $out" ];
    requiredSystemFeatures = [ "big" ];
  };
})");
  farm.startScheduler();
  // Worker 0: native only (x86_64-linux, maybe i686-linux), feature "big".
  auto native = test::WorkerOptions::withSlots(1);
  native.systems = {};
  native.platforms = "native";
  native.features = {"big"};
  farm.addWorker(native);
  ASSERT_TRUE(farm.waitForWorkers(1, 60s)) << farm.worker(0).log();
  farm.createJobset("p", "platforms", coll);
  int64_t eval = farm.evaluate("p", "platforms");

  // The feature step runs on worker 0; the aarch64 step waits: nobody
  // announces aarch64-linux yet.
  ASSERT_TRUE(test::pollUntil(
      [&] {
        bool bigDone = false;
        for (auto& b : farm.builds(eval))
          bigDone |= b.job == "big" && b.finished;
        return bigDone &&
               farm.metric("kiln_queue_steps{system=\"aarch64-linux\"}") == 1.0;
      },
      120s))
      << farm.metricsText() << farm.worker(0).log();
  for (auto& s : farm.steps()) {
    if (s.system == "aarch64-linux") {
      EXPECT_EQ(s.attempts, 0) << s.worker;
    }
  }

  // Worker 1: the default platforms (native, qemu-user), no features.
  auto emulating = test::WorkerOptions::withSlots(1);
  emulating.systems = {};
  farm.addWorker(emulating);
  ASSERT_TRUE(farm.waitForBuilds(eval, 180s)) << farm.worker(1).log();
  std::map<std::string, std::string> workerOf;
  for (auto& s : farm.steps()) {
    EXPECT_EQ(s.status, 0) << s.drvPath << ": " << s.error;
    EXPECT_EQ(s.attempts, 1) << s.drvPath;
    workerOf[s.system] = s.worker;
  }
  EXPECT_EQ(workerOf["aarch64-linux"], farm.workerName(1));
  EXPECT_EQ(workerOf["x86_64-linux"], farm.workerName(0));
  EXPECT_NE(farm.worker(1).log().find("aarch64-linux"), std::string::npos);

  store::LocalStore central(farm.stateDir());
  bool sawArm = false;
  for (auto& o : farm.view()->outputs()) {
    auto text = readFile(central.physicalRoot() + "/" +
                         central.parsePath(o.path).baseName());
    if (text.rfind("machine=", 0) != 0) continue;
    sawArm = true;
    EXPECT_EQ(text.substr(0, text.find('\n')), "machine=aarch64");
    EXPECT_NE(text.find("arg=hello\n"), std::string::npos) << text;
  }
  EXPECT_TRUE(sawArm);
  // A worker that exits non-zero when stopped says why in its log.
  EXPECT_EQ(farm.stopWorker(0), 0) << farm.worker(0).log();
  EXPECT_EQ(farm.stopWorker(1), 0) << farm.worker(1).log();
  EXPECT_EQ(farm.stopScheduler(), 0);
}

}  // namespace
}  // namespace kiln
