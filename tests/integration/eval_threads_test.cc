// `kiln eval --workers N` (threaded evaluation on one heap): exactly the
// same output for every N as one thread (order included), per-job errors,
// dependency cycles across threads reported as infinite recursion instead
// of hanging, every reported .drv valid in the store the threads wrote to,
// and missing collector roots caught by collecting every 64 KiB.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/common/file.h"
#include "kiln/store/local_store.h"
#include "eval_jobs.h"
#include "test_support.h"

namespace kiln {
namespace {

class EvalThreads : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(file_) << test::evalJobsCollection(400); }

  test::RunResult eval(const std::string& file, std::vector<std::string> extra,
                       bool readOnly = true, std::vector<std::string> env = {}) {
    std::vector<std::string> args = {test::kilnBinary(), "eval", file, "--json"};
    if (readOnly) args.push_back("--readonly-mode");
    args.insert(args.end(), extra.begin(), extra.end());
    env.push_back("KILN_STATE_DIR=" + state_);
    return test::run(args, "", env);
  }

  // Every N gives byte-identical stdout and the same failure count.
  void expectSameForEveryN(const std::string& file, size_t jobs,
                           std::vector<std::string> env = {}) {
    auto base = eval(file, {}, true, env);
    ASSERT_EQ(base.exitCode, 0) << base.err;
    ASSERT_EQ(test::nonEmptyLines(base.out).size(), jobs);
    for (const char* n : {"1", "2", "4", "8"}) {
      SCOPED_TRACE(std::string(n) + " threads");
      auto r = eval(file, {"--workers", n}, true, env);
      EXPECT_EQ(r.exitCode, 0) << r.err;
      EXPECT_EQ(r.out, base.out);
      EXPECT_EQ(r.err, base.err);
    }
  }

  TempDir dir_{"kiln-eval-threads"};
  std::string file_ = dir_.path() + "/default.nix";
  std::string state_ = dir_.path() + "/state";
};

TEST_F(EvalThreads, SameOutputForEveryNumberOfThreads) { expectSameForEveryN(file_, 403); }

TEST_F(EvalThreads, SameOutputWhileCollectingEvery64KiB) {
  expectSameForEveryN(file_, 403, {"KILN_GC_EVERY=65536"});
}

// The nixpkgs-shaped generator, both dependency shapes: overlays, scopes,
// callPackage, overrides — most of the evaluator's paths.
TEST_F(EvalThreads, SameOutputOnGeneratedPackageSets) {
  for (const char* shape : {"window", "layered"}) {
    SCOPED_TRACE(shape);
    std::string out = dir_.path() + "/set-" + shape;
    auto gen = test::run({"python3", test::sourceDir() + "/bench/gen-pkgset.py",
                          "600", out, "--shape", shape, "--core", "100"});
    ASSERT_EQ(gen.exitCode, 0) << gen.err;
    expectSameForEveryN(out + "/default.nix", 601);
  }
}

// A jobset that is its package set filtered (filterAttrs, a concatMap over
// every package, and a tests set): the root's long concatMap runs on the
// list helpers before the job threads start.
TEST_F(EvalThreads, SameOutputOnAFilteredByNameSet) {
  std::string out = dir_.path() + "/byname";
  auto gen = test::run({"python3", test::sourceDir() + "/bench/gen-byname.py", "600", out});
  ASSERT_EQ(gen.exitCode, 0) << gen.err;
  // 600 packages, 7 aliases, the tests of every 4th package (2 each).
  expectSameForEveryN(out + "/default.nix", 911);
  expectSameForEveryN(out + "/default.nix", 911, {"KILN_GC_EVERY=65536"});
}

// Dependency chains that threads force at once, so they wait for each
// other all along: the same output as one thread, thrown errors and a
// cycle's infinite recursion included, and nothing else reported as one.
TEST_F(EvalThreads, SameOutputOnDependencyChains) {
  std::string file = test::sourceDir() + "/tests/data/eval_threads/chain.nix";
  expectSameForEveryN(file, 400);
  auto r = eval(file, {"--workers", "2"});
  size_t recursion = 0, thrown = 0;
  for (auto& line : test::nonEmptyLines(r.out)) {
    auto job = nlohmann::json::parse(line);
    if (!job.contains("error")) continue;
    auto error = job["error"].get<std::string>();
    if (error.find("infinite recursion encountered") != std::string::npos) ++recursion;
    if (error.find("broken p") != std::string::npos) ++thrown;
  }
  EXPECT_EQ(recursion, 2u);
  EXPECT_EQ(thrown, 11u);
}

TEST_F(EvalThreads, ErrorsStayPerJob) {
  auto r = eval(file_, {"--workers", "2"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  test::expectPerJobErrors(r.out);
  EXPECT_NE(r.err.find("kiln eval: 2 of 403 jobs failed"), std::string::npos) << r.err;
}

// Jobs whose values need each other: whichever threads meet the cycle,
// every job of it fails with infinite recursion and nothing hangs.
TEST_F(EvalThreads, CyclesAcrossThreadsAreInfiniteRecursion) {
  std::string file = test::sourceDir() + "/tests/data/eval_threads/cycle.nix";
  for (const char* n : {"1", "2", "4", "8"}) {
    SCOPED_TRACE(std::string(n) + " threads");
    auto r = eval(file, {"--workers", n});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    auto lines = test::nonEmptyLines(r.out);
    ASSERT_EQ(lines.size(), 52u);
    for (auto& line : lines) {
      auto job = nlohmann::json::parse(line);
      ASSERT_TRUE(job.contains("error")) << line;
      EXPECT_NE(job["error"].get<std::string>().find("infinite recursion encountered"),
                std::string::npos)
          << line;
    }
  }
}

TEST_F(EvalThreads, EveryReportedDerivationIsValidInTheStore) {
  auto r = eval(file_, {"--workers", "3"}, /*readOnly=*/false);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  store::LocalStore store(state_);
  size_t checked = 0;
  for (auto& line : test::nonEmptyLines(r.out)) {
    auto job = nlohmann::json::parse(line);
    if (job.contains("error")) continue;
    auto drv = job["drvPath"].get<std::string>();
    EXPECT_TRUE(store.isValid(store.parsePath(drv))) << drv;
    ++checked;
  }
  EXPECT_EQ(checked, 401u);
}

TEST_F(EvalThreads, RefusesWorkersWithProcesses) {
  auto r = eval(file_, {"--workers", "2", "--processes", "2"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("--workers and --processes exclude each other"), std::string::npos) << r.err;
  // Threads share one heap: a memory limit recycles worker processes only.
  r = eval(file_, {"--workers", "2", "--max-memory-size", "512"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("--max-memory-size applies to --processes"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kiln
