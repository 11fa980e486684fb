// Bad input for `kiln eval` and `kiln instantiate`: each kind of mistake
// gives a clear error naming the position, a non-zero exit and no crash;
// in `kiln eval` a broken job is reported alone and the others still come.
#include <gtest/gtest.h>

#include <fstream>

#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

struct BadCase {
  const char* file;
  const char* text;
  const char* message;   ///< expected in stderr
  const char* position;  ///< "file:line:col" expected in stderr ("" if Nix shows none)
};

const BadCase kCases[] = {
    {"syntax.nix", "let x = 1 in x", "syntax error, unexpected IN", "syntax.nix:1:11"},
    {"type.nix", "{ a = 1 + \"x\"; }.a", "cannot add a string to an integer", "type.nix:1:11"},  // the operand, as Nix
    {"missing.nix", "{ a = 1; }.b", "attribute 'b' missing", "missing.nix:1:1"},
    {"loop.nix", "let x = x; in x", "infinite recursion encountered", "loop.nix:1:9"},
    {"throw.nix", "throw \"boom\"", "error: boom", ""},
    {"cycle1.nix", "import ./cycle2.nix", "infinite recursion encountered", "cycle1.nix:1:1"},
    {"depth.nix", "let f = x: f (x + 1); in f 0", "stack overflow", "depth.nix:1:"},
};

class EvalBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& c : kCases) std::ofstream(dir_.path() + "/" + c.file) << c.text;
    std::ofstream(dir_.path() + "/cycle2.nix") << "import ./cycle1.nix";
  }

  test::RunResult kiln(std::vector<std::string> args) {
    args.insert(args.begin(), test::kilnBinary());
    return test::run(args, "", {"KILN_STATE_DIR=" + dir_.path() + "/state"});
  }

  TempDir dir_{"kiln-eval-bad"};
};

TEST_F(EvalBadInput, EachMistakeIsAClearErrorWithPosition) {
  for (const auto& c : kCases) {
    std::string file = dir_.path() + "/" + c.file;
    for (const char* cmd : {"eval", "instantiate"}) {
      auto r = kiln({cmd, file});
      SCOPED_TRACE(std::string(cmd) + " " + c.file);
      EXPECT_EQ(r.exitCode, 1) << r.err;  // not a signal (128+n), not success
      EXPECT_NE(r.err.find("error:"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(c.position), std::string::npos) << r.err;
    }
  }
}

TEST_F(EvalBadInput, MissingFileNamesThePath) {
  std::string file = dir_.path() + "/absent.nix";
  for (const char* cmd : {"eval", "instantiate"}) {
    auto r = kiln({cmd, file});
    EXPECT_EQ(r.exitCode, 1) << r.err;
    EXPECT_NE(r.err.find(file), std::string::npos) << r.err;
  }
}

TEST_F(EvalBadInput, EvalReportsBrokenJobsAndContinues) {
  std::string file = dir_.path() + "/mixed.nix";
  std::ofstream(file) << "let mk = n: derivation { name = n; system = \"x\"; builder = \"/b\"; };\n"
                         "in { a = mk \"a\"; b = throw \"b is broken\"; c = mk \"c\";\n"
                         "     d = { recurseForDerivations = true; e = 1 + true; }; }\n";
  auto r = kiln({"eval", file, "--json"});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("{\"attr\":\"a\",\"name\":\"a\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("{\"attr\":\"b\",\"error\":\"b is broken\"}"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("{\"attr\":\"c\",\"name\":\"c\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("{\"attr\":\"d.e\",\"error\":\"cannot add a Boolean to an integer"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("mixed.nix:3:"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("2 of 4 jobs failed"), std::string::npos) << r.err;
}

TEST_F(EvalBadInput, UsageErrorsExitWithTwo) {
  EXPECT_EQ(kiln({"eval"}).exitCode, 2);
  EXPECT_EQ(kiln({"eval", "x.nix", "--arg", "onlyname"}).exitCode, 2);
  EXPECT_EQ(kiln({"eval", "--help"}).exitCode, 0);
}

}  // namespace
}  // namespace kiln
