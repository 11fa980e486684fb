// CI of package changes: `kiln serve --config` with a jobset whose input is
// a git repository (made here, nixpkgs-shaped: packages depending on each
// other). A commit changes one package; the next evaluation builds exactly
// that package and its dependents, as the scheduler's records show, and
// the web's comparison of the two evaluations lists them as changed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln/common/sqlite.h"
#include "kiln/scheduler/state_db.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Seven packages: base <- libA <- {appA, appB}; other <- tool; top needs
// appA and tool. libA's build script lives in libA.nix.
const char* kPackages = R"(
let
  mk = name: script: derivation {
    inherit name;
    system = builtins.currentSystem;
    PATH = "/usr/bin:/bin";
    builder = "/bin/sh";
    args = [ "-c" script ];
  };
in rec {
  base = mk "base" "echo base > $out";
  libA = mk "libA" "cat ${base} > $out; ${import ./libA.nix}";
  appA = mk "appA" "cat ${libA} > $out";
  appB = mk "appB" "cat ${libA} ${base} > $out";
  other = mk "other" "echo other > $out";
  tool = mk "tool" "cat ${other} > $out";
  top = mk "top" "cat ${appA} ${tool} > $out";
}
)";

void git(const std::string& repo, std::vector<std::string> args) {
  args.insert(args.begin(), {"git", "-C", repo, "-c", "user.name=kiln", "-c",
                             "user.email=kiln@example.org"});
  auto r = test::run(args);
  ASSERT_EQ(r.exitCode, 0) << r.err;
}

void commitLibA(const std::string& repo, const std::string& line) {
  writeFile(repo + "/libA.nix", "\"echo " + line + " >> $out\"\n");
  git(repo, {"add", "-A"});
  git(repo, {"commit", "-q", "-m", line});
}

// The derivation names of the steps with an id above `after` that
// finished successfully, and the highest step id.
std::pair<std::set<std::string>, int64_t> stepsBuiltAfter(
    const std::string& state, int64_t after) {
  scheduler::StateDb db(state + "/scheduler.sqlite",
                        scheduler::StateDb::ReadOnly{});
  auto s = db.db().prepare(
      "SELECT id, drv_path FROM steps WHERE id > ? AND finished = 1 AND "
      "status = 0");
  s.bind(after);
  std::set<std::string> names;
  int64_t last = after;
  while (s.step()) {
    last = std::max(last, s.getInt(0));
    std::string drv = baseNameOf(s.getStr(1));
    names.insert(drv.substr(33, drv.size() - 33 - 4));
  }
  return {names, last};
}

TEST(ServeGitCi, ACommitRebuildsThePackageAndItsDependentsOnly) {
  std::string why;
  if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
  if (!test::haveProgram("git")) GTEST_SKIP() << "no git";
  TempDir dir;
  std::string repo = dir.path() + "/pkgs", state = dir.path() + "/state";
  createDirs(repo);
  git(repo, {"init", "-q", "-b", "main"});
  writeFile(repo + "/default.nix", kPackages);
  commitLibA(repo, "v1");
  int port = test::freeLoopbackPort(), web = test::freeLoopbackPort();
  writeFile(dir.path() + "/kiln.toml",
            "state_dir = \"state\"\n[scheduler]\nlisten = "
            "\"tcp://127.0.0.1:" +
                std::to_string(port) +
                "\"\nweb_listen = \"127.0.0.1:" + std::to_string(web) +
                "\"\nmetrics_port = -1\n[local_workers]\ncount = 1\n"
                "sandbox = \"none\"\n[[project]]\nname = \"ci\"\n"
                "[[project.jobset]]\nname = \"pkgs\"\ngit = \"pkgs\"\n"
                "branch = \"main\"\ncheck_interval = 0\n");
  test::KilnProcess serve({"serve", "--config", dir.path() + "/kiln.toml"},
                          dir.path() + "/serve.log");
  ASSERT_TRUE(serve.waitForLog("builds: 7/7 finished, 7 succeeded", 180s))
      << serve.log();
  auto [first, last] = stepsBuiltAfter(state, 0);
  EXPECT_EQ(first.size(), 7u);

  commitLibA(repo, "v2");
  size_t before = serve.log().size();
  auto eval = test::run({test::kilnBinary(), "jobset", "eval", "--project",
                         "ci", "pkgs", "--state-dir", state});
  ASSERT_EQ(eval.exitCode, 0) << eval.err;
  // serve's console counts the new evaluation's 7 builds (not 14).
  ASSERT_TRUE(test::pollUntil(
      [&] {
        return serve.log().find("builds: 7/7 finished, 7 succeeded, 0 failed "
                                "(all builds finished)",
                                before) != std::string::npos;
      },
      180s))
      << serve.log();
  auto [rebuilt, unused] = stepsBuiltAfter(state, last);
  EXPECT_EQ(rebuilt, (std::set<std::string>{"libA", "appA", "appB", "top"}));

  // The comparison with the previous evaluation shows the same jobs changed.
  int64_t second = 0;
  {
    scheduler::StateDb db(state + "/scheduler.sqlite",
                          scheduler::StateDb::ReadOnly{});
    auto s = db.db().prepare("SELECT max(id) FROM evaluations");
    ASSERT_TRUE(s.step());
    second = s.getInt(0);
  }
  auto cmp = nlohmann::json::parse(test::httpGet(
      web, "/api/eval/" + std::to_string(second) + "/compare?kind=changed"));
  EXPECT_EQ(cmp["counts"]["changed"], 4);
  EXPECT_EQ(cmp["counts"]["new"], 0);
  std::set<std::string> changed;
  for (auto& row : cmp["changes"]["rows"]) changed.insert(row["job"]);
  EXPECT_EQ(changed, (std::set<std::string>{"libA", "appA", "appB", "top"}));
  EXPECT_EQ(serve.stop(), 0) << serve.log();
}

}  // namespace
}  // namespace kiln
