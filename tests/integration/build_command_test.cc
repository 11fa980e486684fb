// `kiln build`: one process evaluates, builds in the linux sandbox with its
// embedded scheduler and worker, prints the outputs and leaves result
// symlinks; a second run builds nothing; a failure exits 1 with the
// failing step's log lines; --keep-going builds what does not depend on it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "kiln/common/file.h"
#include "kiln/common/file_lock.h"
#include "kiln/scheduler/state_view.h"
#include "test_support.h"

namespace kiln {
namespace {

constexpr const char* kCollection = R"nix(
let
  mk = name: script: deps: derivation {
    inherit name;
    system = builtins.currentSystem;
    builder = "/bin/sh";
    args = [ "-c" script ];
    PATH = "/usr/bin:/bin";
    deps = deps;
  };
in rec {
  base = mk "base" "echo base > $out" [ ];
  top = mk "top" "cat ${base} > $out; echo top >> $out" [ base ];
  split = derivation {
    name = "split";
    system = builtins.currentSystem;
    builder = "/bin/sh";
    outputs = [ "out" "doc" ];
    args = [ "-c" "echo bin > $out; echo manual > $doc" ];
  };
  broken = mk "broken" "echo broken-marker-line; exit 3" [ ];
  afterBroken = mk "after-broken" "cat ${broken} > $out" [ broken ];
}
)nix";

class BuildCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0 && !test::haveProgram("unshare"))
      GTEST_SKIP() << "needs root or user namespaces";
    writeFile(dir_.path() + "/default.nix", kCollection);
  }

  /// `kiln build FILE ARGS... --state-dir STATE -o DIR/result`.
  test::RunResult build(std::vector<std::string> args) {
    std::vector<std::string> argv = {
        test::kilnBinary(),      "build", dir_.path() + "/default.nix",
        "--state-dir",           state(), "-o",
        dir_.path() + "/result", "-j",    "2"};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run(argv);
  }
  std::string state() const { return dir_.path() + "/state"; }
  std::string read(const std::string& link) {
    return readFile(dir_.path() + "/" + link);
  }
  /// How many times any step was started, from the scheduler's records.
  int64_t attempts() {
    scheduler::StateView view(state());
    int64_t n = 0;
    for (auto& s : view.steps()) n += s.attempts;
    return n;
  }

  TempDir dir_;
};

TEST_F(BuildCommand, BuildsLinksResultsAndRebuildsNothing) {
  auto r = build({"-A", "top", "-A", "split", "-A", "split.doc"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(read("result"), "base\ntop\n");
  EXPECT_EQ(read("result-2"), "bin\n");
  EXPECT_EQ(read("result-3-doc"), "manual\n");
  auto lines = test::nonEmptyLines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  std::error_code ec;
  EXPECT_EQ(std::filesystem::read_symlink(dir_.path() + "/result", ec).string(),
            lines[0]);
  // Three targets, two derivations (split and split.doc are one build).
  EXPECT_NE(r.err.find("[2/2 built"), std::string::npos) << r.err;
  // The links are GC roots: a collection keeps what they lead to.
  auto gc =
      test::run({test::kilnBinary(), "store", "gc", "--state-dir", state()});
  ASSERT_EQ(gc.exitCode, 0) << gc.err;
  EXPECT_EQ(read("result-3-doc"), "manual\n");
  int64_t before = attempts();
  EXPECT_EQ(before, 3);  // base, top, split

  auto again = build({"-A", "top", "-A", "split", "-A", "split.doc"});
  ASSERT_EQ(again.exitCode, 0) << again.err;
  EXPECT_EQ(again.out, r.out);
  EXPECT_EQ(attempts(), before) << "a second run built something";
}

TEST_F(BuildCommand, FailureExitsWithTheStepsLog) {
  auto r = build({"-A", "afterBroken"});
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("error: builder for"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("broken.drv"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("broken-marker-line"), std::string::npos) << r.err;
  EXPECT_FALSE(pathExists(dir_.path() + "/result"));
}

TEST_F(BuildCommand, KeepGoingBuildsWhatDoesNotDependOnAFailure) {
  auto r = build({"-A", "afterBroken", "-A", "top", "--keep-going"});
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_NE(r.err.find("afterBroken"), std::string::npos) << r.err;
  scheduler::StateView view(state());
  bool topBuilt = false;
  for (auto& b : view.builds())
    if (b.job == "top") topBuilt = b.finished && b.status == 0;
  EXPECT_TRUE(topBuilt) << r.err;
}

// An ordinary user builds too: no daemon, no root (the sandbox uses user
// namespaces). Run as `nobody` when the test runs as root.
TEST_F(BuildCommand, NeedsNoRoot) {
  if (geteuid() != 0 || !test::haveProgram("setpriv"))
    GTEST_SKIP() << "runs as root through setpriv to become nobody";
  ASSERT_EQ(chown(dir_.path().c_str(), 65534, 65534), 0);
  auto argv = std::vector<std::string>{"setpriv",
                                       "--reuid=65534",
                                       "--regid=65534",
                                       "--clear-groups",
                                       "env",
                                       "HOME=" + dir_.path(),
                                       test::kilnBinary(),
                                       "build",
                                       dir_.path() + "/default.nix",
                                       "-A",
                                       "top",
                                       "--state-dir",
                                       state(),
                                       "-o",
                                       dir_.path() + "/result"};
  auto r = test::run(argv);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(read("result"), "base\ntop\n");
}

TEST_F(BuildCommand, BadInputGetsAClearError) {
  auto r = build({"-A", "nosuch"});
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("nosuch"), std::string::npos) << r.err;
  auto usage = test::run({test::kilnBinary(), "build", "--jobs", "many"});
  EXPECT_EQ(usage.exitCode, 2) << usage.err;
}

// The farm starts while the expression is evaluated: a farm that cannot
// start (another scheduler holds the state directory) is reported, and an
// evaluation error is still the one reported when both fail.
TEST_F(BuildCommand, AFarmThatCannotStartIsReportedAfterTheEvaluation) {
  createDirs(state());
  auto held =
      FileLock::tryAcquire(state() + "/scheduler.lock", LockMode::kExclusive);
  ASSERT_TRUE(held);
  auto r = build({"-A", "top"});
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("scheduler.lock is locked"), std::string::npos) << r.err;
  auto bad = build({"-A", "nosuch"});
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_NE(bad.err.find("nosuch"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.err.find("scheduler.lock"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace kiln
