// `kiln build --substituters`: a second machine (another state directory)
// fetches from the first one's HTTP binary cache everything it has and
// builds no step; with a key the cache did not sign with, it warns and
// builds itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln/scheduler/state_view.h"
#include "kiln_process.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

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
}
)nix";

class BuildSubstitute : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0 && !test::haveProgram("unshare"))
      GTEST_SKIP() << "needs root or user namespaces";
    writeFile(dir("default.nix"), kCollection);
    for (auto name : {"farm", "other"}) {
      auto r = test::run({test::kilnBinary(), "store", "generate-key",
                          std::string(name) + "-1", "--secret-key-file",
                          dir(std::string(name) + ".sk"), "--public-key-file",
                          dir(std::string(name) + ".pk")});
      ASSERT_EQ(r.exitCode, 0) << r.err;
    }
  }
  std::string dir(const std::string& name) const {
    return dir_.path() + "/" + name;
  }
  /// `kiln build default.nix -A top -A split --state-dir DIR/state ARGS`.
  test::RunResult build(const std::string& state,
                        std::vector<std::string> args) {
    std::vector<std::string> argv = {test::kilnBinary(),
                                     "build",
                                     dir("default.nix"),
                                     "-A",
                                     "top",
                                     "-A",
                                     "split",
                                     "--state-dir",
                                     dir(state),
                                     "-o",
                                     dir(state + "-result"),
                                     "-j",
                                     "2"};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run(argv);
  }
  /// How many times any step was started in `state`.
  int64_t attempts(const std::string& state) {
    scheduler::StateView view(dir(state));
    int64_t n = 0;
    for (auto& s : view.steps()) n += s.attempts;
    return n;
  }

  TempDir dir_;
};

TEST_F(BuildSubstitute, ASecondMachineBuildsNothingTheCacheHas) {
  auto first = build("farm", {});
  ASSERT_EQ(first.exitCode, 0) << first.err;
  ASSERT_EQ(attempts("farm"), 3);
  int port = test::freeLoopbackPort();
  std::string url = "http://127.0.0.1:" + std::to_string(port);
  test::KilnProcess sched({"scheduler", "--state-dir", dir("farm"), "--listen",
                           "tcp://127.0.0.1:*", "--insecure-plaintext",
                           "--web-listen", "127.0.0.1:" + std::to_string(port),
                           "--cache-secret-key-file", dir("farm.sk")},
                          dir("sched.log"));
  // The line that names the web address comes once the web is up.
  ASSERT_TRUE(sched.waitForLog(" web http://", 30s)) << sched.log();

  auto second = build("second", {"--substituters", url, "--trusted-public-keys",
                                 readFile(dir("farm.pk"))});
  ASSERT_EQ(second.exitCode, 0) << second.err << sched.log();
  EXPECT_THAT(second.err, HasSubstr("from " + url));
  // The same output paths, in this machine's store.
  std::string expected = first.out;
  for (size_t at; (at = expected.find("/farm/")) != std::string::npos;)
    expected.replace(at, 6, "/second/");
  EXPECT_EQ(second.out, expected);
  EXPECT_EQ(readFile(dir("second-result")), "base\ntop\n");
  EXPECT_EQ(readFile(dir("second-result-2")), "bin\n");
  EXPECT_EQ(attempts("second"), 0) << "a step was built";

  // Signed by a key this machine does not trust: it builds itself.
  auto third = build("third", {"--substituters", url, "--trusted-public-keys",
                               readFile(dir("other.pk"))});
  ASSERT_EQ(third.exitCode, 0) << third.err;
  EXPECT_THAT(third.err, HasSubstr("lacks a valid signature"));
  EXPECT_EQ(readFile(dir("third-result")), "base\ntop\n");
  EXPECT_EQ(attempts("third"), 3);
  EXPECT_EQ(sched.stop(30s), 0) << sched.log();
}

}  // namespace
}  // namespace kiln
