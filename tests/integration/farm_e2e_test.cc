// End to end (issue 4): a real `kiln scheduler` and real
// `kiln worker --private-store` processes on loopback (tests/support/farm.h)
// build gen-collection.py collections from an evaluation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln/store/local_store.h"
#include "test_support.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;

std::string generate(const std::string& dir, int n) {
  std::string out = dir + "/collection-" + std::to_string(n);
  auto r = test::run({"python3", test::sharedDir() + "/bench/gen-collection.py",
                      std::to_string(n), out});
  if (r.exitCode != 0) throw Error("gen-collection.py failed: " + r.err);
  // The builders call `cat`, but Nix (and kiln) start them with
  // PATH=/path-not-set: give the derivations a PATH of their own.
  std::string file = out + "/default.nix";
  std::string text = readFile(file);
  std::string anchor = "    inherit system;\n";
  auto at = text.find(anchor);
  if (at == std::string::npos) throw Error("unexpected gen-collection output");
  text.insert(at + anchor.size(), "    PATH = \"/usr/bin:/bin\";\n");
  writeFile(file, text);
  return out;
}

#define SKIP_UNLESS_FARM_CAN_RUN()                                   \
  do {                                                               \
    std::string why;                                                 \
    if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;              \
    if (!test::haveProgram("nix-instantiate")) GTEST_SKIP() << "no Nix"; \
  } while (0)

// Two workers on one host, each with its own store mounted at /nix/store
// in its own namespace: both build, nothing lands in the host's /nix/store.
TEST(FarmE2E, TwoPrivateStoreWorkersBuildASmallCollection) {
  SKIP_UNLESS_FARM_CAN_RUN();
  test::Farm farm;
  std::string coll = generate(farm.dir(), 40);
  farm.startScheduler();
  farm.addWorker(test::WorkerOptions::withSlots(2));
  farm.addWorker(test::WorkerOptions::withSlots(2));
  ASSERT_TRUE(farm.waitForWorkers(2, 60s)) << farm.worker(0).log();
  farm.createJobset("gen", "small", coll);
  int64_t eval = farm.evaluate("gen", "small");
  ASSERT_TRUE(farm.waitForBuilds(eval, 120s))
      << farm.scheduler().log() << farm.worker(0).log();
  auto builds = farm.builds(eval);
  ASSERT_EQ(builds.size(), 40u);
  for (auto& b : builds) EXPECT_EQ(b.status, 0) << b.job << ": " << b.error;

  std::map<std::string, int> perWorker;
  store::LocalStore central(farm.stateDir());
  for (auto& s : farm.steps()) {
    EXPECT_EQ(s.status, 0) << s.drvPath << ": " << s.error;
    EXPECT_EQ(s.attempts, 1) << s.drvPath;
    perWorker[s.worker]++;
  }
  EXPECT_EQ(perWorker.size(), 2u) << "both workers should have built";
  // Outputs are in the central store and in the building worker's store,
  // never in the host's /nix/store.
  for (auto& row : farm.query("SELECT path FROM build_outputs")) {
    auto p = central.parsePath(row[0]);
    EXPECT_TRUE(central.isValid(p)) << row[0];
    EXPECT_FALSE(pathExists(row[0])) << row[0] << " leaked to the host";
  }
  EXPECT_EQ(farm.stopWorker(0), 0);
  EXPECT_EQ(farm.stopWorker(1), 0);
  EXPECT_EQ(farm.stopScheduler(), 0);
}

}  // namespace
}  // namespace kiln
