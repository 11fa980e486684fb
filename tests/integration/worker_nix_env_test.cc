// The build runner against real Nix 2.8: the same derivation (written by
// nix-instantiate) built by kiln and by `nix-build --option sandbox false`
// in one throwaway store must give byte-identical outputs (same NAR hash)
// and the same references. The builder prints its sorted environment with
// the build directory replaced, so any difference in the environment shows.
#include <gtest/gtest.h>

#include <sstream>

#include "kiln/common/file.h"
#include "kiln/store/derivation.h"
#include "kiln/worker/build_runner.h"
#include "test_support.h"

namespace kiln::worker {
namespace {

const char* kExpr = R"nix(
let
  sh = "/bin/sh";
  dep = derivation {
    name = "dep"; system = builtins.currentSystem; builder = sh;
    args = ["-c" "echo dependency > $out"];
  };
in {
  inherit dep;
  main = derivation {
    name = "main"; system = builtins.currentSystem; builder = sh;
    outputs = ["out" "dev"];
    args = ["-c" ''
      /usr/bin/env | /usr/bin/sort | /bin/sed "s|$NIX_BUILD_TOP|TOP|g" > $out
      echo "$0 $(umask)" >> $out
      /bin/cat $bigPath >> $out
      echo ${dep} $dev >> $out
      echo ${dep} > $dev
    ''];
    big = "passed as a file";
    passAsFile = ["big"];
    flag = true; off = false; num = 42; list = ["a" 1];
  };
}
)nix";

class WorkerNixEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::haveProgram("nix-build"))
      GTEST_SKIP() << "nix-build not installed";
    createDirs(storeDir_);
    writeFile(root_.path() + "/default.nix", kExpr);
  }

  /// Runs a Nix command against the throwaway store.
  test::RunResult nix(std::vector<std::string> argv) {
    if (argv[0] == "nix-build")
      for (auto s : {"--option", "sandbox", "false", "--option",
                     "build-users-group", "", "--option", "substituters", "",
                     "--option", "cores", "3", "--no-out-link"})
        argv.push_back(s);
    return test::run(argv, "",
                     {"NIX_STORE_DIR=" + storeDir_,
                      "NIX_STATE_DIR=" + root_.path() + "/state",
                      "NIX_LOG_DIR=" + root_.path() + "/log", "NIX_REMOTE="});
  }

  std::string line(const std::string& s) { return s.substr(0, s.find('\n')); }

  TempDir root_{"worker-nix-env"};
  std::string storeDir_ = root_.path() + "/store";
};

TEST_F(WorkerNixEnv, SameOutputsAndReferencesAsNixBuild) {
  auto file = root_.path() + "/default.nix";
  auto dep = nix({"nix-build", file, "-A", "dep"});
  if (dep.exitCode != 0)
    GTEST_SKIP() << "nix-build cannot build here: " << dep.err;
  auto drvFile = line(nix({"nix-instantiate", file, "-A", "main"}).out);
  ASSERT_FALSE(drvFile.empty());

  store::StoreDir sd(storeDir_);
  BuildRequest req;
  req.drvPath = sd.parsePath(drvFile);
  req.drv = store::readDerivationFile(sd, drvFile);
  req.inputClosure = {sd.parsePath(line(dep.out))};
  req.buildCores = 3;
  BuildRunnerConfig cfg;
  cfg.store = {sd, storeDir_, false};
  RealProcessLauncher launcher;
  BuildRunner runner(cfg, launcher, RealClock::instance());
  std::string log;
  auto res = runner.run(req, [&](std::string_view d) { log += d; });
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg << log;

  // Move kiln's outputs aside so that Nix builds the same paths itself.
  std::map<std::string, std::string> kilnText;
  for (auto& o : res.outputs) {
    kilnText[o.name] = readFile(o.physicalPath);
    deletePath(o.physicalPath);
  }
  auto built = nix({"nix-build", drvFile});
  ASSERT_EQ(built.exitCode, 0) << built.err;
  for (auto& o : res.outputs) {
    auto p = sd.printPath(o.path);
    EXPECT_EQ(readFile(p), kilnText[o.name]) << o.name;
    EXPECT_EQ(line(nix({"nix-store", "-q", "--hash", p}).out),
              o.narHash.toNix32())
        << o.name;
    EXPECT_EQ(line(nix({"nix-store", "-q", "--size", p}).out),
              std::to_string(o.narSize));
    std::set<std::string> nixRefs, kilnRefs;
    std::istringstream in(nix({"nix-store", "-q", "--references", p}).out);
    for (std::string l; std::getline(in, l);) nixRefs.insert(l);
    for (auto& r : o.references) kilnRefs.insert(sd.printPath(r));
    EXPECT_EQ(kilnRefs, nixRefs) << o.name;
  }
  EXPECT_NE(kilnText["out"].find("NIX_BUILD_TOP=TOP\n"), std::string::npos)
      << kilnText["out"];
}

}  // namespace
}  // namespace kiln::worker
