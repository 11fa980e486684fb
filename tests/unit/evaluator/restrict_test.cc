// Restricted evaluation (restrict-eval): what a restricted evaluation may
// read, and the errors (Nix 2.8's wording) for what it may not.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "eval_test_util.h"
#include "kiln/common/file.h"

namespace kiln::eval {
namespace {

using testing::evalError;
using testing::evalStrict;
using ::testing::HasSubstr;

class Restricted : public ::testing::Test {
 protected:
  void SetUp() override {
    createDirs(in_ + "/sub");
    createDirs(out_);
    writeFile(in_ + "/data.txt", "data");
    writeFile(in_ + "/sub/default.nix", "\"sub\"");
    writeFile(out_ + "/secret", "s3cret");
    ASSERT_EQ(symlink((out_ + "/secret").c_str(), (in_ + "/escape").c_str()),
              0);
  }
  EvalSettings restricted() const {
    EvalSettings s;
    s.restrictEval = true;
    s.allowedPaths = {in_};
    return s;
  }
  std::string eval(const std::string& expr) {
    EvalState st(restricted());
    return evalStrict(st, expr);
  }
  TempDir dir_{"kiln-restrict"};
  std::string in_ = dir_.path() + "/in", out_ = dir_.path() + "/out";
};

TEST_F(Restricted, AllowedPathsAreReadable) {
  EXPECT_EQ(eval("builtins.readFile " + in_ + "/data.txt"), "\"data\"");
  EXPECT_EQ(eval("import " + in_ + "/sub"), "\"sub\"");
  EXPECT_EQ(eval("builtins.attrNames (builtins.readDir " + in_ + ")"),
            "[ \"data.txt\" \"escape\" \"sub\" ]");
  EXPECT_EQ(eval("builtins.pathExists " + in_ + "/data.txt"), "true");
  // Paths the evaluation put into the store may be read back (not written
  // here: no store writer, so only the check is exercised).
  EXPECT_THAT(
      eval("builtins.typeOf (builtins.path { path = " + in_ + "/data.txt; })"),
      HasSubstr("string"));
}

TEST_F(Restricted, OtherPathsAreRefusedNamingThePath) {
  std::string secret = out_ + "/secret";
  for (const std::string& expr : std::vector<std::string>{
           "builtins.readFile " + secret, "import " + secret,
           "builtins.readDir " + out_, "builtins.hashFile \"sha256\" " + secret,
           "\"${" + secret + "}\"", "builtins.path { path = " + secret + "; }",
           "builtins.filterSource (p: t: true) " + out_,
           std::string("builtins.storePath "
                       "/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-x")}) {
    std::string err = evalError(expr, restricted());
    EXPECT_THAT(err, HasSubstr("is forbidden in restricted mode")) << expr;
    EXPECT_THAT(err, HasSubstr("access to absolute path '")) << expr;
  }
  EXPECT_THAT(
      evalError("builtins.readFile " + secret, restricted()),
      HasSubstr("while realising the context of path '" + secret + "'"));
  // A forbidden path does not exist, rather than telling that it does.
  EXPECT_EQ(eval("builtins.pathExists " + secret), "false");
}

TEST_F(Restricted, SymlinksAndDotDotCannotEscape) {
  EXPECT_THAT(
      evalError("builtins.readFile " + in_ + "/escape", restricted()),
      HasSubstr("access to canonical path '" + out_ + "/secret' is forbidden"));
  EXPECT_THAT(
      evalError("builtins.readFile " + in_ + "/../out/secret", restricted()),
      HasSubstr("access to absolute path '" + out_ + "/secret' is forbidden"));
}

TEST_F(Restricted, SearchPathEntriesAreAllowed) {
  EvalSettings s;
  s.restrictEval = true;
  s.searchPath = {"in=" + in_};
  EXPECT_EQ(evalStrict(*std::make_unique<EvalState>(s), "import <in/sub>"),
            "\"sub\"");
  EXPECT_THAT(evalError("builtins.readFile " + out_ + "/secret", s),
              HasSubstr("forbidden"));
}

TEST_F(Restricted, EnvironmentIsEmptyAndFetchersNeedAllowedUris) {
  setenv("KILN_RESTRICT_TEST", "visible", 1);
  EXPECT_EQ(evalStrict("builtins.getEnv \"KILN_RESTRICT_TEST\""),
            "\"visible\"");
  EXPECT_EQ(eval("builtins.getEnv \"KILN_RESTRICT_TEST\""), "\"\"");
  EXPECT_THAT(
      evalError("builtins.fetchurl \"https://example.org/x\"", restricted()),
      HasSubstr("access to URI 'https://example.org/x' is forbidden in "
                "restricted mode"));
  EXPECT_THAT(
      evalError("fetchTarball { url = \"file://" + out_ + "/secret\"; }",
                restricted()),
      HasSubstr("access to absolute path '" + out_ + "/secret'"));
  // An allowed URI passes the check; kiln then says it does not download.
  EvalSettings s = restricted();
  s.allowedUris = {"https://example.org"};
  EXPECT_THAT(evalError("builtins.fetchurl \"https://example.org/x\"", s),
              HasSubstr("kiln's evaluator does not download"));
  EXPECT_THAT(evalError("builtins.fetchurl \"https://example.organ/x\"", s),
              HasSubstr("is forbidden in restricted mode"));
}

TEST_F(Restricted, CurrentTimeOnlyWhenAsked) {
  EXPECT_EQ(eval("builtins.typeOf builtins.currentTime"), "\"int\"");  // as Nix
  EvalSettings s = restricted();
  s.refuseCurrentTime = true;
  EXPECT_THAT(
      evalError("builtins.currentTime", s),
      HasSubstr("'builtins.currentTime' is not allowed in restricted mode"));
}

TEST_F(Restricted, HintIsAppended) {
  EvalSettings s = restricted();
  s.restrictHint = " (use --allow-path)";
  EXPECT_THAT(evalError("builtins.readFile /etc/passwd", s),
              HasSubstr("forbidden in restricted mode (use --allow-path)"));
}

TEST(Unrestricted, StorePathGivesTheObjectAsContext) {
  EXPECT_EQ(evalStrict("builtins.getContext (builtins.storePath "
                       "/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-x/bin/sh)"),
            "{ \"/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-x\" = { path = "
            "true; }; }");
  EXPECT_THAT(evalError("builtins.storePath /etc/passwd"),
              HasSubstr("path '/etc/passwd' is not in the Nix store"));
}

}  // namespace
}  // namespace kiln::eval
