// `kiln instantiate` as a drop-in for nix-instantiate 2.8: for each flag
// combination, the same stdout, stderr (up to the program's name) and exit
// code as the real nix-instantiate run in the same folder (read-only mode,
// so neither writes a store).
#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

constexpr const char* kCollection = R"({ who ? "world", n ? 1 }:
let mk = name: derivation { inherit name; system = "x86_64-linux"; builder = "/bin/sh";
                            args = [ "-c" "echo ${who} > $out" ]; };
in {
  hello = mk "hello";
  multi = derivation { name = "multi"; system = "x"; builder = "/b"; outputs = [ "out" "lib" ]; };
  set = { recurseForDerivations = true; a = mk "a"; b = mk "b"; };
  plain = { a = mk "pa"; };
  list = [ (mk "l1") (mk "l2") ];
  twice = let d = mk "d"; in { a = d; b = d; };
  value = { x = n; y = [ 1 "two" ./default.nix ]; z = who; f = x: x; };
  num = n * 2;
}
)";

struct Case {
  std::vector<std::string> args;
  std::vector<std::string> env = {};
  std::string input = "";  ///< stdin
};

class InstantiateDropIn : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!test::haveProgram("nix-instantiate")) GTEST_SKIP() << "nix-instantiate is not installed";
    createDirs(dir_ + "/nixconf");
    writeFile(dir_ + "/nixconf/nix.conf", "build-users-group =\n");
    writeFile(dir_ + "/default.nix", kCollection);
    createDirs(dir_ + "/sp/lib");
    writeFile(dir_ + "/sp/lib/default.nix", "{ v = 42; }\n");
  }

  test::RunResult run(const std::string& program) {
    // The environment is set by the shell, so the case's NIX_PATH wins.
    std::string cmd = "cd '" + dir_ + "' && NIX_PATH= NIX_CONF_DIR='" + dir_ + "/nixconf'";
    for (auto& e : GetParam().env) cmd += " " + e;  // VAR=value, no spaces
    cmd += " exec " + program + " --readonly-mode";
    for (auto& a : GetParam().args) cmd += " '" + a + "'";
    auto r = test::run({"sh", "-c", cmd}, GetParam().input);
    for (std::string name : {"nix-instantiate", "kiln instantiate"})
      for (size_t at; (at = r.err.find(name)) != std::string::npos;)
        r.err.replace(at, name.size(), "PROGRAM");
    return r;
  }

  TempDir tmp_{"kiln-dropin"};
  std::string dir_ = tmp_.path();
};

TEST_P(InstantiateDropIn, SameOutputErrorsAndExitCode) {
  auto nix = run("nix-instantiate");
  auto ours = run(test::kilnBinary() + " instantiate");
  EXPECT_LT(nix.exitCode, 2) << nix.err;  // the case ran (no shell error)
  EXPECT_EQ(ours.exitCode, nix.exitCode);
  EXPECT_EQ(ours.out, nix.out);
  EXPECT_EQ(ours.err, nix.err);
}

std::vector<Case> cases() {
  std::vector<Case> c = {
      {{}},  // ./default.nix
      {{"default.nix"}},
      {{"-A", "hello", "-A", "set"}},
      {{"-A", "multi"}},
      {{"-A", "multi.lib"}},  // drvPath!lib
      {{"-A", "plain"}},      // no recurseForDerivations: nothing
      {{"-A", "list"}},
      {{"-A", "list.1"}},
      {{"-A", "twice"}},  // one value, printed once
      {{"--argstr", "who", "bob", "-A", "hello"}},
      {{"--arg", "n", "5", "--eval", "-A", "num"}},
      {{"--eval", "-A", "value"}},
      {{"--eval", "--strict", "-A", "value"}},
      {{"--eval", "--strict", "--json", "-A", "value.y"}},  // no newline
      {{"--eval", "--json", "-A", "num", "-A", "value.z"}},
      {{"--eval", "--xml", "-A", "value"}},
      {{"--eval", "--strict", "--xml", "--no-location", "-A", "value"}},
      {{"--parse", "default.nix"}},
      {{"--parse", "-E", "x: rec { b = 1; a.c = \"$x\"; inherit x; }"}},
      {{"-E", "with import ./. {}; [ hello { x = multi; } ]"}},
      {{"--eval", "-E", "(import <lib>).v", "-I", "lib=sp/lib"}},
      {{"--eval", "-E", "import <lib>", "-I", "sp"}},
      {{"--eval", "-E", "(import <lib>).v"}, {"NIX_PATH=lib=sp/lib"}},
      {{"--eval", "-"}, {}, "1 + 2"},
      {{"--eval", "-E", "1", "-E", "2"}},
      {{"-A", "nope"}},
      {{"missing.nix"}},
      {{"--eval", "-E", "throw \"x\""}},
      {{"-E", "[ [ 1 ] ]"}},
      {{"--bogus"}},
      {{"-A"}},
  };
  return c;
}

INSTANTIATE_TEST_SUITE_P(Flags, InstantiateDropIn, ::testing::ValuesIn(cases()));

}  // namespace
}  // namespace kiln
