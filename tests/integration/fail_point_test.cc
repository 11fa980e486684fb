// Crash safety at every named fail point (docs/operations.md, "Fail
// points"): the real process runs with KILN_FAIL_POINT naming one point, is
// killed there (SIGKILL to itself), and is run again without it. Then
// nothing finished is built again, nothing is lost, nothing is registered
// half (a path without its derivation-output row, an evaluation without its
// builds) and `kiln store verify` is clean.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln/store/local_store.h"
#include "kiln/store/nar.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr int kKilled = 128 + 9;

std::vector<std::string> failEnv(const std::string& point) {
  return {"KILN_FAIL_POINT=" + point};
}

size_t storeTemps(const std::string& state) {
  size_t n = 0;
  for (auto& e : std::filesystem::directory_iterator(state + "/store"))
    n += e.path().filename().string().starts_with(store::kStoreTempPrefix);
  return n;
}

void expectVerifyClean(const std::string& state) {
  auto v =
      test::run({test::kilnBinary(), "store", "verify", "--state-dir", state});
  EXPECT_EQ(v.exitCode, 0) << v.out << v.err;
}

// The store verifies, and a collection leaves no temporary behind.
void expectCleanAfterGc(const std::string& state) {
  expectVerifyClean(state);
  auto gc =
      test::run({test::kilnBinary(), "store", "gc", "--state-dir", state});
  EXPECT_EQ(gc.exitCode, 0) << gc.err;
  EXPECT_EQ(storeTemps(state), 0u);
}

// A test name for fail point `info.param` ("a.b-c:2" → "a_b_c_2").
std::string pointTestName(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (auto& c : n)
    if (c == '.' || c == '-' || c == ':') c = '_';
  return n;
}

// ------------------------------------------------------------ kiln store add

class StoreAddPoint : public ::testing::TestWithParam<std::string> {};

TEST_P(StoreAddPoint, KilledThereTheAddIsAllOrNothing) {
  TempDir dir("kiln-fp-add");
  std::string tree = dir.path() + "/tree", state = dir.path() + "/state";
  createDirs(tree + "/sub");
  writeFile(tree + "/a", "alpha");
  writeFile(tree + "/sub/b", "beta");
  std::string kiln = test::kilnBinary();
  ASSERT_EQ(test::run({kiln, "store", "verify", "--state-dir", state}).exitCode,
            0);
  HashingSink h(HashAlgo::kSha256);
  store::dumpPath(tree, h);
  auto expected =
      store::StoreDir().makeSourcePath("tree", h.finish().first, {}, false);

  auto r = test::run({kiln, "store", "add", "--state-dir", state, tree}, "",
                     failEnv(GetParam()));
  ASSERT_EQ(r.exitCode, kKilled) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("fail point " + GetParam() + " reached"));
  EXPECT_EQ(r.out, "");  // nothing was announced
  {
    store::LocalStore store(state);
    EXPECT_EQ(store.isValid(expected), GetParam() == "store.add.after-commit");
  }
  expectVerifyClean(state);

  auto again = test::run({kiln, "store", "add", "--state-dir", state, tree});
  ASSERT_EQ(again.exitCode, 0) << again.err;
  EXPECT_EQ(again.out, store::StoreDir().printPath(expected) + "\n");
  expectCleanAfterGc(state);
}

INSTANTIATE_TEST_SUITE_P(Points, StoreAddPoint,
                         ::testing::Values("store.add.after-rename",
                                           "store.add.before-commit",
                                           "store.add.after-commit"),
                         pointTestName);

// ----------------------------------------- batches (kiln instantiate)

class StoreBatchPoint : public ::testing::TestWithParam<std::string> {};

TEST_P(StoreBatchPoint, KilledThereTheBatchIsAllOrNothing) {
  TempDir dir("kiln-fp-batch");
  std::string state = dir.path() + "/state", file = dir.path() + "/c.nix";
  writeFile(file, R"(let
  mk = name: script: derivation {
    inherit name; system = "x86_64-linux"; builder = "/bin/sh";
    args = [ "-c" script ];
  };
  a = mk "a" "echo a > $out";
in [ a (mk "b" "cat ${a} > $out") ])");
  std::string kiln = test::kilnBinary();
  std::vector<std::string> args = {kiln,  "instantiate",     "--state-dir",
                                   state, "--no-gc-warning", file};
  auto r = test::run(args, "", failEnv(GetParam()));
  ASSERT_EQ(r.exitCode, kKilled) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("fail point " + GetParam() + " reached"));
  EXPECT_EQ(r.out, "");  // no .drv path printed before its batch committed
  size_t validAfterKill;
  {
    store::LocalStore store(state);
    validAfterKill = store.queryAllValidPaths().size();
    if (GetParam() == "store.batch.after-commit")
      EXPECT_GE(validAfterKill, 2u);  // both .drvs (one batch)
    else
      EXPECT_EQ(validAfterKill, 0u);
  }
  expectVerifyClean(state);

  auto again = test::run(args);
  ASSERT_EQ(again.exitCode, 0) << again.err;
  auto drvs = test::nonEmptyLines(again.out);
  ASSERT_EQ(drvs.size(), 2u) << again.out;
  {
    store::LocalStore store(state);
    for (auto& d : drvs) {
      auto p = store.parsePath(d);
      ASSERT_TRUE(store.isValid(p)) << d;
      // The output rows came with the .drv (one transaction).
      EXPECT_EQ(store.queryDerivationOutputs(p).size(), 1u) << d;
    }
  }
  expectCleanAfterGc(state);
}

INSTANTIATE_TEST_SUITE_P(Points, StoreBatchPoint,
                         ::testing::Values("store.batch.after-rename",
                                           "store.batch.before-commit",
                                           "store.batch.after-commit"),
                         pointTestName);

// ------------------------------------------------------------ kiln store gc

class StoreGcPoint : public ::testing::TestWithParam<std::string> {};

TEST_P(StoreGcPoint, KilledThereTheCollectionLosesNothingRooted) {
  TempDir dir("kiln-fp-gc");
  std::string state = dir.path() + "/state";
  std::optional<store::StorePath> kept, dropped;
  {
    store::LocalStore store(state);
    kept = store.addText("kept", "kept", {});
    dropped = store.addText("dropped", "dropped", {});
    store.addRoot("keep", *kept);
  }
  std::string kiln = test::kilnBinary();
  auto r = test::run({kiln, "store", "gc", "--state-dir", state}, "",
                     failEnv(GetParam()));
  ASSERT_EQ(r.exitCode, kKilled) << r.out << r.err;
  {
    store::LocalStore store(state);
    EXPECT_TRUE(store.isValid(*kept));
    EXPECT_EQ(readFile(store.physicalPath(*kept)), "kept");
    // Unregistered first, deleted second: never registered and missing.
    EXPECT_FALSE(store.isValid(*dropped));
    EXPECT_EQ(pathExists(store.physicalPath(*dropped)),
              GetParam() == "store.gc.after-unregister");
  }
  expectVerifyClean(state);
  auto gc = test::run({kiln, "store", "gc", "--state-dir", state});
  EXPECT_EQ(gc.exitCode, 0) << gc.err;
  store::LocalStore store(state);
  EXPECT_TRUE(store.isValid(*kept));
  EXPECT_FALSE(pathExists(store.physicalPath(*dropped)));
  expectVerifyClean(state);
}

INSTANTIATE_TEST_SUITE_P(Points, StoreGcPoint,
                         ::testing::Values("store.gc.after-unregister",
                                           "store.gc.after-delete"),
                         pointTestName);

// ------------------------------------------------------- the scheduler

// How often each derivation's builder ran to its end (one line per run in
// `<farm>/runs`), by name.
std::map<std::string, int> builderRuns(const test::Farm& farm) {
  std::map<std::string, int> runs;
  std::string f = farm.dir() + "/runs";
  if (!pathExists(f)) return runs;
  for (auto& l : test::nonEmptyLines(readFile(f))) runs[l]++;
  return runs;
}

std::string nameOf(const std::string& drvPath) {
  auto base = drvPath.substr(drvPath.rfind('/') + 34);  // <hash>-
  return base.substr(0, base.size() - 4);               // .drv
}

// Every output row of a finished build is valid with its derivation-output
// row, the store verifies and no upload temporary is left.
void expectNothingHalfRegistered(const test::Farm& farm) {
  store::LocalStore central(farm.stateDir());
  for (auto& b : farm.builds()) {
    ASSERT_TRUE(b.finished) << b.job;
    auto drv = central.parsePath(b.drvPath);
    auto outs = central.queryDerivationOutputs(drv);
    EXPECT_FALSE(outs.empty()) << b.drvPath;
    for (auto& [name, path] : outs) EXPECT_TRUE(central.isValid(path));
  }
  for (auto& o : farm.view()->outputs())
    EXPECT_TRUE(central.isValid(central.parsePath(o.path))) << o.path;
  auto r = farm.kiln({"store", "verify"});
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(farm.stateDir() + "/tmp"));
}

class SchedulerPoint : public ::testing::TestWithParam<std::string> {};

TEST_P(SchedulerPoint, KilledThereTheFarmFinishesWithoutRebuilding) {
  KILN_SKIP_UNLESS_FARM_CAN_RUN();
  test::FarmOptions opts;
  opts.heartbeat = 300ms;
  opts.schedulerArgs = {"--retry-backoff-ms", "100"};
  test::Farm farm(opts);
  std::string runs = farm.dir() + "/runs";
  auto step = [&](const std::string& name) {
    return "echo " + name + " > $out; echo " + name + " >> " + runs;
  };
  std::string coll = farm.writeCollection("c", R"(let
  a = mk "a" ")" + step("a") + R"(" [];
  b = mk "b" ")" + step("b") + R"(" [ a ];
  c = mk "c" ")" + step("c") + R"(" [ a ];
in { top = mk "top" ")" + step("top") + R"(" [ b c ]; inherit c; })");
  farm.armSchedulerFailPoint(GetParam());
  farm.startScheduler();
  farm.addWorker();
  ASSERT_TRUE(farm.waitForWorkers(1, 60s));
  farm.createJobset("p", "j", coll);
  // --if-changed: the request, applied again by the restarted scheduler,
  // skips the evaluation if the jobset's inputs hash says it was recorded,
  // so a hash recorded without its builds would lose them.
  test::KilnProcess eval({"jobset", "eval", "--project", "p", "j", "--json",
                          "--if-changed", "--state-dir", farm.stateDir()},
                         farm.dir() + "/eval.log");
  auto died = farm.scheduler().waitExit(300s);
  ASSERT_EQ(died, std::optional<int>(kKilled)) << farm.scheduler().log();
  std::string point = GetParam().substr(0, GetParam().find(':'));
  EXPECT_THAT(farm.scheduler().log(),
              HasSubstr("fail point " + point + " reached"));

  // What the killed scheduler left: builds either all recorded or none.
  auto buildsAtKill = farm.builds();
  EXPECT_TRUE(buildsAtKill.empty() || buildsAtKill.size() == 2u)
      << buildsAtKill.size();
  std::map<std::string, bool> finishedAtKill;
  for (auto& s : farm.steps()) finishedAtKill[nameOf(s.drvPath)] = s.finished;
  auto runsAtKill = builderRuns(farm);

  farm.startScheduler();
  ASSERT_EQ(eval.waitExit(300s), std::optional<int>(0)) << eval.log();
  ASSERT_TRUE(farm.waitForBuilds(0, 300s)) << farm.scheduler().log();
  for (auto& b : farm.builds()) EXPECT_EQ(b.status, 0) << b.job << b.error;
  auto after = builderRuns(farm);
  for (auto name : {"a", "b", "c", "top"}) {
    EXPECT_GE(after[name], 1) << name;  // nothing lost
    if (finishedAtKill[name])           // nothing finished is rebuilt
      EXPECT_EQ(after[name], runsAtKill[name]) << name;
    else  // at most the run cut short by the kill, and one after it
      EXPECT_LE(after[name], runsAtKill[name] + 1) << name;
  }
  for (auto& s : farm.steps()) {
    EXPECT_TRUE(s.finished) << s.drvPath;
    EXPECT_EQ(s.status, 0) << s.drvPath;
  }
  expectNothingHalfRegistered(farm);
}

INSTANTIATE_TEST_SUITE_P(
    Points, SchedulerPoint,
    ::testing::Values("scheduler.eval.before-commit",
                      "scheduler.eval.after-commit",
                      "scheduler.step-start.before-commit",
                      "scheduler.step-start.after-commit",
                      "store.add.after-rename", "store.add.before-commit",
                      "store.add.after-commit", "scheduler.upload.after-commit",
                      "scheduler.step-finish.before-commit",
                      "scheduler.step-finish.after-commit:2",
                      "scheduler.build-finish.before-commit"),
    pointTestName);

}  // namespace
}  // namespace kiln
