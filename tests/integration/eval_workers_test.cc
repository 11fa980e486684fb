// `kiln eval --processes N` (forked worker processes): the same job lines
// for every N (order aside),
// errors per job, every reported .drv valid in the store several worker
// processes wrote to, and memory bounded by replacing workers
// (--max-memory-size) on a collection whose jobs allocate far more in all
// than any one keeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/common/file.h"
#include "kiln/store/local_store.h"
#include "eval_jobs.h"
#include "test_support.h"

namespace kiln {
namespace {

class EvalWorkers : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(file_) << test::evalJobsCollection(300); }

  test::RunResult eval(std::vector<std::string> extra, bool readOnly = true) {
    std::vector<std::string> args = {test::kilnBinary(), "eval", file_,
                                     "--json"};
    if (readOnly) args.push_back("--readonly-mode");
    args.insert(args.end(), extra.begin(), extra.end());
    return test::run(args, "", {"KILN_STATE_DIR=" + state_});
  }

  static std::vector<std::string> sortedLines(const std::string& out) {
    auto lines = test::nonEmptyLines(out);
    std::sort(lines.begin(), lines.end());
    return lines;
  }

  TempDir dir_{"kiln-eval-workers"};
  std::string file_ = dir_.path() + "/default.nix";
  std::string state_ = dir_.path() + "/state";
};

TEST_F(EvalWorkers, SameJobLinesForEveryNumberOfWorkers) {
  auto base = eval({});
  ASSERT_EQ(base.exitCode, 0) << base.err;
  auto want = sortedLines(base.out);
  ASSERT_EQ(want.size(), 303u);
  for (std::vector<std::string> extra :
       {std::vector<std::string>{"--processes", "1"},
        {"--processes", "2"},
        {"--processes", "3"},
        {"--processes", "2", "--max-memory-size", "1"}}) {
    auto r = eval(extra);
    SCOPED_TRACE(extra[1] + (extra.size() > 2
                                 ? " processes, replaced after every job"
                                 : " processes"));
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(sortedLines(r.out), want);
    EXPECT_NE(r.err.find("kiln eval: 2 of 303 jobs failed"), std::string::npos)
        << r.err;
  }
}

TEST_F(EvalWorkers, ErrorsStayPerJob) {
  auto r = eval({"--processes", "2"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  test::expectPerJobErrors(r.out);
}

TEST_F(EvalWorkers, EveryReportedDerivationIsValidInTheSharedStore) {
  auto r = eval({"--processes", "3"}, /*readOnly=*/false);
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
  EXPECT_EQ(checked, 301u);
  EXPECT_TRUE(std::filesystem::is_empty(
      state_ + "/temproots"));  // every worker released its roots
}

// 100,000 jobs, each building and discarding a 300-element list (about
// 20 KB of temporaries per job, 2 GB in all): with workers replaced at
// 128 MiB — before the collector, which starts at 256 MiB allocated, runs —
// no process exceeds 256 MiB.
TEST_F(EvalWorkers, MemoryStaysBoundedWhenWorkersAreReplaced) {
  std::ofstream(dir_.path() + "/big.nix") << R"(
let
  mk = i: derivation {
    name = "j${toString i}"; system = "x86_64-linux"; builder = "/bin/sh";
    n = builtins.length (builtins.genList (x: x) 300)
      + builtins.stringLength (builtins.concatStringsSep "," (builtins.genList toString 20));
  };
in builtins.listToAttrs (builtins.genList (i: { name = "j${toString i}"; value = mk i; }) 100000)
)";
  auto r = test::run({test::kilnBinary(), "eval", dir_.path() + "/big.nix", "--readonly-mode",
                      "--processes", "2", "--max-memory-size", "128"});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(test::nonEmptyLines(r.out).size(), 100000u);
  EXPECT_LT(r.peakRssBytes, 256u << 20) << "peak RSS " << (r.peakRssBytes >> 20) << " MiB";
}

}  // namespace
}  // namespace kiln
