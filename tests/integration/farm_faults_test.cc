// Faults of issue 4, each with a real `kiln scheduler` and real
// `kiln worker --private-store` processes on loopback (tests/support/
// farm.h): workers refused (unknown key, other protocol version), a
// corrupted upload refused and retried, a silent build killed (status 7),
// a failing dependency (status 2, then cached failures). Killed and stopped
// processes are in farm_crash_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln/protocol/messages.h"
#include "kiln/store/local_store.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;


std::string buildOf(const std::vector<test::FarmBuild>& bs,
                    const std::string& job, int* status) {
  for (auto& b : bs)
    if (b.job == job) {
      *status = b.status;
      return b.drvPath;
    }
  *status = -2;
  return "";
}

test::FarmStep stepOf(const test::Farm& farm, const std::string& drvPath) {
  for (auto& s : farm.steps())
    if (s.drvPath == drvPath) return s;
  throw Error("no step for " + drvPath);
}

// `kiln store verify` over the central store: every path's NAR hash.
void expectCentralStoreVerifies(const test::Farm& farm) {
  auto r = farm.kiln({"store", "verify"});
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
}

TEST(FarmFaults, AWorkerWithAnUnknownKeyIsRefused) {
  KILN_SKIP_UNLESS_FARM_CAN_RUN();
  test::FarmOptions fo;
  fo.curve = true;
  test::Farm farm(fo);
  farm.addWorker();  // its key is allowed
  test::WorkerOptions stranger;
  stranger.keyAllowed = false;
  farm.addWorker(stranger);
  farm.startScheduler();
  ASSERT_TRUE(farm.waitForWorkers(1, 60s)) << farm.scheduler().log();
  auto code = farm.worker(1).waitExit(60s);
  ASSERT_TRUE(code.has_value()) << farm.worker(1).log();
  EXPECT_EQ(*code, 1);
  EXPECT_THAT(farm.worker(1).log(),
              HasSubstr("refused this worker's key (ZAP status 400): add the "
                        "worker's public key to the scheduler's allow-list"));
  EXPECT_THAT(farm.scheduler().log(), HasSubstr("is not in the allow-list"));
  // The allowed worker stays connected; only it counts.
  EXPECT_TRUE(farm.worker(0).running()) << farm.worker(0).log();
  EXPECT_EQ(farm.metric("kiln_workers"), 1.0);
  EXPECT_EQ(farm.stopWorker(0), 0);
  EXPECT_EQ(farm.stopScheduler(), 0);
}

TEST(FarmFaults, AWorkerSpeakingAnotherProtocolVersionIsRefused) {
  KILN_SKIP_UNLESS_FARM_CAN_RUN();
  test::Farm farm;
  farm.startScheduler();
  test::WorkerOptions future;
  future.extraArgs = {"--debug-protocol-version", "99"};
  farm.addWorker(future);
  auto code = farm.worker(0).waitExit(60s);
  ASSERT_TRUE(code.has_value()) << farm.worker(0).log();
  EXPECT_EQ(*code, 1);
  EXPECT_THAT(farm.worker(0).log(),
              HasSubstr("kiln worker: the scheduler refused this worker: "
                        "scheduler speaks protocol " +
                        std::to_string(protocol::kProtocolVersion) +
                        ", this worker speaks 99"));
  // A worker of the previous protocol (4) is told to upgrade.
  test::WorkerOptions old;
  old.extraArgs = {"--debug-protocol-version", "4"};
  farm.addWorker(old);
  code = farm.worker(1).waitExit(60s);
  ASSERT_TRUE(code.has_value()) << farm.worker(1).log();
  EXPECT_EQ(*code, 1);
  EXPECT_THAT(farm.worker(1).log(),
              HasSubstr("kiln worker: the scheduler refused this worker: "
                        "scheduler speaks protocol 5, this worker speaks 4: "
                        "upgrade the worker"));
  EXPECT_EQ(farm.metric("kiln_workers"), 0.0);
  // A worker of the right version joins the same scheduler.
  farm.addWorker();
  EXPECT_TRUE(farm.waitForWorkers(1, 60s)) << farm.worker(2).log();
  EXPECT_EQ(farm.stopWorker(2), 0);
  EXPECT_EQ(farm.stopScheduler(), 0);
}

TEST(FarmFaults, ACorruptedUploadIsRefusedAndTheStepRetried) {
  KILN_SKIP_UNLESS_FARM_CAN_RUN();
  test::FarmOptions fo;
  fo.schedulerArgs = {"--retry-backoff-ms", "200"};
  test::Farm farm(fo);
  std::string coll = farm.writeCollection(
      "corrupt",
      R"({ big = mk "big" "for i in $(seq 1 20000); do echo line $i; done > $out" []; })");
  farm.startScheduler();
  test::WorkerOptions liar;
  liar.extraArgs = {"--debug-corrupt-uploads", "1"};
  farm.addWorker(liar);
  ASSERT_TRUE(farm.waitForWorkers(1, 60s)) << farm.worker(0).log();
  farm.createJobset("p", "j", coll);
  int64_t eval = farm.evaluate("p", "j");
  ASSERT_TRUE(farm.waitForBuilds(eval, 120s))
      << farm.scheduler().log() << farm.worker(0).log();
  auto builds = farm.builds(eval);
  ASSERT_EQ(builds.size(), 1u);
  EXPECT_EQ(builds[0].status, 0) << builds[0].error;
  auto step = stepOf(farm, builds[0].drvPath);
  EXPECT_EQ(step.status, 0);
  EXPECT_EQ(step.attempts, 2) << "one refused upload, one retry";
  EXPECT_THAT(farm.worker(0).log(), HasSubstr("corrupting the upload"));
  EXPECT_THAT(farm.scheduler().log(), HasSubstr("NAR hash mismatch"));
  auto outs = farm.view()->outputs();
  ASSERT_EQ(outs.size(), 1u);
  store::LocalStore central(farm.stateDir());
  auto out = central.parsePath(outs[0].path);
  ASSERT_TRUE(central.isValid(out));
  EXPECT_THAT(readFile(central.physicalPath(out)), HasSubstr("line 20000\n"));
  expectCentralStoreVerifies(farm);
}

TEST(FarmFaults, ABuildSilentLongerThanMaxSilentIsKilledWithStatus7) {
  KILN_SKIP_UNLESS_FARM_CAN_RUN();
  test::Farm farm;
  std::string pidFile = farm.dir() + "/quiet.pid";
  std::string coll = farm.writeCollection("silent", R"({
  quiet = mk "quiet" "echo started; echo $$ > )" + pidFile +
                                                  R"(; exec sleep 600" []
    // { meta.maxSilent = 1; };
  chatty = mk "chatty" "for i in 1 2 3 4 5 6; do echo $i; sleep 0.4; done; echo > $out" []
    // { meta.maxSilent = 1; };
})");
  farm.startScheduler();
  farm.addWorker(test::WorkerOptions::withSlots(2));
  ASSERT_TRUE(farm.waitForWorkers(1, 60s)) << farm.worker(0).log();
  farm.createJobset("p", "j", coll);
  auto start = std::chrono::steady_clock::now();
  int64_t eval = farm.evaluate("p", "j");
  ASSERT_TRUE(farm.waitForBuilds(eval, 120s))
      << farm.scheduler().log() << farm.worker(0).log();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 60s);
  int status = 0;
  auto quiet = buildOf(farm.builds(eval), "quiet", &status);
  EXPECT_EQ(status, 7);
  auto step = stepOf(farm, quiet);
  EXPECT_EQ(step.status, 7);
  EXPECT_EQ(step.attempts, 1);
  EXPECT_THAT(step.error, HasSubstr("build produced no output for 1 s"));
  // Silence, not total time: the chatty build ran longer than 1 s.
  buildOf(farm.builds(eval), "chatty", &status);
  EXPECT_EQ(status, 0);
  // The builder was killed, not left behind.
  int pid = std::stoi(readFile(pidFile));
  EXPECT_TRUE(test::pollUntil([&] { return kill(pid, 0) != 0; }, 10s));
  // A timed-out build is a cached failure.
  auto cached = farm.view()->cachedFailure(quiet);
  ASSERT_TRUE(cached);
  EXPECT_EQ(cached->status, 7);
}

TEST(FarmFaults, AFailedDependencyFailsDependentsThenIsACachedFailure) {
  KILN_SKIP_UNLESS_FARM_CAN_RUN();
  test::Farm farm;
  std::string common = R"(let bad = mk "bad" "echo failing; exit 1" [];
      top = mk "top" "echo > $out" [ bad ];
      ok = mk "ok" "echo > $out" []; in )";
  std::string coll =
      farm.writeCollection("deps", common + "{ inherit top ok; }");
  farm.startScheduler();
  farm.addWorker();
  ASSERT_TRUE(farm.waitForWorkers(1, 60s)) << farm.worker(0).log();
  farm.createJobset("p", "j", coll);
  int64_t eval1 = farm.evaluate("p", "j");
  ASSERT_TRUE(farm.waitForBuilds(eval1, 120s))
      << farm.scheduler().log() << farm.worker(0).log();
  int status = 0;
  buildOf(farm.builds(eval1), "top", &status);
  EXPECT_EQ(status, 2);
  buildOf(farm.builds(eval1), "ok", &status);
  EXPECT_EQ(status, 0);
  auto steps1 = farm.steps();
  int64_t attempts1 = 0;
  for (auto& s : steps1) attempts1 += s.attempts;

  // Next evaluation: `bad` is a job of its own now and a new job depends on
  // it. Nothing is built again: bad is a cached failure (8), its
  // dependents fail at once (2).
  farm.writeCollection("deps", common + R"({ inherit top ok bad;
      top2 = mk "top2" "echo > $out" [ bad ]; })");
  int64_t eval2 = farm.evaluate("p", "j");
  ASSERT_TRUE(farm.waitForBuilds(eval2, 120s)) << farm.scheduler().log();
  auto builds2 = farm.builds(eval2);
  ASSERT_EQ(builds2.size(), 4u);
  auto bad = buildOf(builds2, "bad", &status);
  EXPECT_EQ(status, 8);
  buildOf(builds2, "top", &status);
  EXPECT_EQ(status, 2);
  buildOf(builds2, "top2", &status);
  EXPECT_EQ(status, 2);
  buildOf(builds2, "ok", &status);
  EXPECT_EQ(status, 0);
  int64_t attempts2 = 0;
  for (auto& s : farm.steps()) attempts2 += s.attempts;
  EXPECT_EQ(attempts2, attempts1) << "nothing was dispatched again";
  auto cached = farm.view()->cachedFailure(bad);
  ASSERT_TRUE(cached);
  EXPECT_EQ(cached->status, 1);
}

}  // namespace
}  // namespace kiln
