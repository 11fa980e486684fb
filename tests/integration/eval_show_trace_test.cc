// Error output of `kiln instantiate` with and without --show-trace,
// compared byte for byte with nix-instantiate 2.8 on cases where both
// evaluators report the same positions.
#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

// A derivation attribute failing two function calls deep; line 10 of
// a file whose 9th line is empty and whose last line has no newline.
constexpr const char* kFile = R"(let
  f = x: x.a + 1;
  g = y: f { a = y; };
in {
  d = derivation { name = "x"; system = "x"; builder = "/b"; foo = g true; };
  plain = throw "plain failure";
  nested = { a = { b = throw "deep"; }; };

  anon = (z: z.missing) { };
})";

class EvalShowTrace : public ::testing::TestWithParam<std::vector<std::string>> {
 protected:
  void SetUp() override {
    if (!test::haveProgram("nix-instantiate")) GTEST_SKIP() << "nix-instantiate is not installed";
    createDirs(dir_.path() + "/nixconf");
    writeFile(dir_.path() + "/nixconf/nix.conf", "build-users-group =\n");
    writeFile(file_, kFile);
  }
  test::RunResult run(const std::string& program) {
    std::vector<std::string> argv = {program};
    if (program != "nix-instantiate") argv = {program, "instantiate"};
    argv.push_back(file_);
    argv.push_back("--readonly-mode");
    for (auto& a : GetParam()) argv.push_back(a);
    return test::run(argv, "", {"NIX_CONF_DIR=" + dir_.path() + "/nixconf"});
  }
  TempDir dir_{"kiln-show-trace"};
  std::string file_ = dir_.path() + "/t.nix";
};

TEST_P(EvalShowTrace, StderrAndExitCodeMatchNix) {
  auto nix = run("nix-instantiate");
  auto ours = run(test::kilnBinary());
  EXPECT_EQ(ours.exitCode, nix.exitCode);
  EXPECT_EQ(ours.err, nix.err);
  EXPECT_EQ(ours.out, nix.out);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, EvalShowTrace,
    ::testing::Values(std::vector<std::string>{"-A", "d"},
                      std::vector<std::string>{"-A", "d", "--show-trace"},
                      std::vector<std::string>{"-A", "plain"},
                      std::vector<std::string>{"-A", "plain", "--show-trace"},
                      std::vector<std::string>{"--eval", "--strict", "-A", "nested"},
                      std::vector<std::string>{"--eval", "-A", "anon"},
                      std::vector<std::string>{"--eval", "-A", "anon", "--show-trace"}));

}  // namespace
}  // namespace kiln
