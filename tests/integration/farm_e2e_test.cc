// End to end (issue 4): a real `kiln scheduler` and real
// `kiln worker --private-store` processes on loopback (tests/support/farm.h)
// build gen-collection.py collections from an evaluation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <set>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln/store/local_store.h"
#include "test_support.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;

// gen-collection.py's DAG made buildable (bench/buildable-collection.sh:
// PATH for the builders, outputs of bounded size).
std::string generate(const std::string& dir, int n) {
  std::string out = dir + "/collection-" + std::to_string(n);
  auto r = test::run({test::sourceDir() +
                          "/bench/buildable-collection.sh",
                      std::to_string(n), out},
                     "", {"KILN_SHARED_DIR=" + test::sharedDir()});
  if (r.exitCode != 0) throw Error("buildable-collection.sh failed: " + r.err);
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
  for (auto& o : farm.view()->outputs()) {
    auto p = central.parsePath(o.path);
    EXPECT_TRUE(central.isValid(p)) << o.path;
    EXPECT_FALSE(pathExists(o.path)) << o.path << " leaked to the host";
  }
  EXPECT_EQ(farm.stopWorker(0), 0);
  EXPECT_EQ(farm.stopWorker(1), 0);
  EXPECT_EQ(farm.stopScheduler(), 0);
}

// Nix's answer for a few jobs: `nix-build` into a chroot store (which Nix
// 2.8 always sandboxes; the sandbox gets /bin and /usr for /bin/sh and cat).
class NixReference {
 public:
  explicit NixReference(const std::string& dir) : dir_(dir) {
    createDirs(dir_ + "/conf");
    writeFile(dir_ + "/conf/nix.conf",
              "build-users-group =\nsandbox = false\n"
              "sandbox-paths = /bin /usr /lib /lib64\n");
  }
  test::RunResult nix(std::vector<std::string> argv) const {
    argv.insert(argv.begin() + 1, {"--store", "local?root=" + dir_ + "/root"});
    return test::run(argv, "", {"NIX_CONF_DIR=" + dir_ + "/conf"});
  }

 private:
  std::string dir_;
};

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c != '\n') {
      cur += c;
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// Issue 4's end-to-end test: a scheduler and three workers build
// gen-collection.py 2000 from an evaluation. Every build succeeds, every
// derivation is built exactly once, every output is valid in the central
// store with a correct NAR hash, and for a sample of jobs nix-build gives
// the same output paths and NAR hashes, closures included.
TEST(FarmE2E, ThreeWorkersBuildGenCollection2000LikeNix) {
  SKIP_UNLESS_FARM_CAN_RUN();
  if (!test::haveProgram("nix-build")) GTEST_SKIP() << "no nix-build";
  constexpr int kJobs = 2000;
  test::Farm farm;
  std::string coll = generate(farm.dir(), kJobs);
  farm.startScheduler();
  for (int i = 0; i < 3; i++) farm.addWorker(test::WorkerOptions::withSlots(2));
  ASSERT_TRUE(farm.waitForWorkers(3, 60s)) << farm.scheduler().log();
  farm.createJobset("gen", "big", coll);
  auto t0 = std::chrono::steady_clock::now();
  int64_t eval = farm.evaluate("gen", "big");
  auto t1 = std::chrono::steady_clock::now();
  ASSERT_TRUE(farm.waitForBuilds(eval, 900s)) << farm.scheduler().log();
  auto t2 = std::chrono::steady_clock::now();
  auto secs = [](auto d) { return std::chrono::duration<double>(d).count(); };
  std::cout << "evaluation " << secs(t1 - t0) << " s, builds " << secs(t2 - t1)
            << " s\n";

  auto builds = farm.builds(eval);
  ASSERT_EQ(builds.size(), size_t(kJobs));
  for (auto& b : builds) EXPECT_EQ(b.status, 0) << b.job << ": " << b.error;
  // Nothing was valid before, so every derivation is one step, built once.
  auto steps = farm.steps();
  EXPECT_EQ(steps.size(), size_t(kJobs));
  std::map<std::string, int> perWorker;
  for (auto& s : steps) {
    EXPECT_TRUE(s.finished && s.status == 0) << s.drvPath << ": " << s.error;
    EXPECT_EQ(s.attempts, 1) << s.drvPath << " was dispatched more than once";
    perWorker[s.worker]++;
  }
  EXPECT_EQ(perWorker.size(), 3u);
  for (auto& [w, n] : perWorker) std::cout << w << ": " << n << " steps\n";

  // Every output is registered and its files hash to the recorded NAR hash.
  store::LocalStore central(farm.stateDir());
  std::map<std::string, std::string> outOfJob;
  for (auto& o : farm.view()->outputs()) {
    outOfJob[o.job] = o.path;
    EXPECT_TRUE(central.isValid(central.parsePath(o.path))) << o.path;
  }
  EXPECT_EQ(outOfJob.size(), size_t(kJobs));
  auto verify = farm.kilnJson({"store", "verify"});
  EXPECT_EQ(verify["problems"].size(), 0u) << verify.dump();
  EXPECT_GE(verify["checked"].get<int>(), 2 * kJobs);

  // A sample of five jobs spread over the collection, with small closures
  // (Nix builds each in a sandbox, ~1 s apiece on this machine).
  std::vector<std::string> candidates, sample;
  for (auto& b : builds) {
    auto closure = central.queryRequisites({central.parsePath(b.drvPath)});
    size_t drvs = std::count_if(closure.begin(), closure.end(),
                                [](auto& p) { return p.isDerivation(); });
    if (drvs >= 2 && drvs <= 10) candidates.push_back(b.job);
  }
  for (size_t i = 0; i < 5 && candidates.size() >= 5; i++)
    sample.push_back(candidates[i * (candidates.size() - 1) / 4]);
  ASSERT_EQ(sample.size(), 5u);
  NixReference nix(farm.dir() + "/nix");
  std::vector<std::string> argv = {"nix-build", coll + "/default.nix",
                                   "--no-out-link"};
  for (auto& j : sample) argv.insert(argv.end(), {"-A", j});
  auto built = nix.nix(argv);
  ASSERT_EQ(built.exitCode, 0) << built.err;
  auto paths = lines(built.out);
  ASSERT_EQ(paths.size(), sample.size()) << built.out;
  for (size_t i = 0; i < sample.size(); i++) {
    EXPECT_EQ(paths[i], outOfJob[sample[i]]) << sample[i];
    auto closure = lines(nix.nix({"nix-store", "-qR", paths[i]}).out);
    ASSERT_FALSE(closure.empty()) << paths[i];
    for (auto& p : closure) {
      auto info = central.queryPathInfo(central.parsePath(p));
      ASSERT_TRUE(info) << p << " (closure of " << sample[i]
                        << ") is not in the central store";
      auto hash = lines(nix.nix({"nix-store", "-q", "--hash", p}).out);
      ASSERT_EQ(hash.size(), 1u) << p;
      EXPECT_EQ(hash[0], info->narHash.toNix32()) << p;
    }
  }
  EXPECT_EQ(farm.stopScheduler(), 0);
}

}  // namespace
}  // namespace kiln
