// `cmake --install` of this build tree into a staging folder (DESTDIR), then
// the installed `kiln` run from there: its --version, the plugins it finds
// from its own location (not the build tree's), a small instantiate, and
// the files the install layout promises (docs/operations.md, "Installing").
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "kiln/plugin/abi.h"
#include "kiln/protocol/messages.h"
#include "kiln/scheduler/state_db.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

/// One install for the whole suite: PREFIX=/usr under a staging folder.
class Installed : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    staging_ = new TempDir("kiln-install");
    auto r = test::run(
        {KILN_CMAKE_COMMAND, "--install", test::binaryDir(), "--prefix", "/usr"},
        "", {"DESTDIR=" + staging_->path()});
    installLog_ = new std::string(r.out + r.err);
    installed_ = r.exitCode == 0;
  }
  static void TearDownTestSuite() {
    delete staging_;
    delete installLog_;
  }
  void SetUp() override {
    ASSERT_TRUE(installed_) << "cmake --install failed:\n" << *installLog_;
  }
  static std::string usr(const std::string& rel) {
    return staging_->path() + "/usr/" + rel;
  }
  /// Runs the installed kiln with no plugin path from the environment.
  static test::RunResult kiln(std::vector<std::string> args) {
    args.insert(args.begin(), usr("bin/kiln"));
    return test::run(args, "", {"KILN_PLUGIN_PATH="});
  }

  static TempDir* staging_;
  static std::string* installLog_;
  static bool installed_;
};
TempDir* Installed::staging_ = nullptr;
std::string* Installed::installLog_ = nullptr;
bool Installed::installed_ = false;

TEST_F(Installed, VersionNamesReleaseRevisionAndEveryAbi) {
  auto r = kiln({"--version"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("kiln " KILN_PROJECT_VERSION "\n"));
  EXPECT_THAT(r.out,
              ContainsRegex("\nrevision: ([0-9a-f]{12}(-dirty)?|unknown)\n"));
  EXPECT_THAT(r.out,
              HasSubstr("\nprotocol: " +
                        std::to_string(protocol::kProtocolVersion) + "\n"));
  EXPECT_THAT(
      r.out,
      HasSubstr("\ndatabase schema: " +
                std::to_string(scheduler::StateDb::schemaVersion()) + "\n"));
  EXPECT_THAT(
      r.out,
      HasSubstr("\nplugin ABI: " + std::to_string(KILN_PLUGIN_ABI_MAJOR) + "." +
                std::to_string(KILN_PLUGIN_ABI_MINOR_LATEST) + "\n"));
  // The same binary as the build tree's, only moved.
  auto built = test::run({test::kilnBinary(), "--version"});
  EXPECT_EQ(r.out, built.out);
}

TEST_F(Installed, FindsItsPluginsBesideItself) {
  auto r = kiln({"plugins"});
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  std::string dir = usr("lib/kiln/plugins");
  EXPECT_THAT(r.out, HasSubstr("searched: " + dir));
  for (std::string name : {"linux", "none", "native", "qemu-user", "command",
                           "webhook", "builtin", "nix"})
    EXPECT_THAT(r.out, HasSubstr(dir + "/kiln-plugin-" + name + ".so")) << name;
  EXPECT_THAT(r.out, Not(HasSubstr(test::binaryDir())));
}

TEST_F(Installed, InstantiatesLikeTheBuildTree) {
  TempDir work("kiln-install-work");
  std::string file = work.path() + "/hello.nix";
  writeFile(
      file,
      "derivation { name = \"hello\"; system = \"x86_64-linux\";\n"
      "  builder = \"/bin/sh\"; args = [ \"-c\" \"echo hi > $out\" ]; }\n");
  auto r = kiln({"instantiate", "--state-dir", work.path() + "/state", file});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("^/nix/store/[0-9a-z]{32}-hello\\.drv\n$"));
  auto built =
      test::run({test::kilnBinary(), "instantiate", "--readonly-mode", file});
  EXPECT_EQ(r.out, built.out) << built.err;
}

TEST_F(Installed, LaysOutDocsUnitsCompletionAndManPages) {
  EXPECT_TRUE(pathExists(usr("share/doc/kiln/README.md")));
  EXPECT_TRUE(pathExists(usr("share/doc/kiln/operations.md")));
  EXPECT_TRUE(pathExists(usr("share/doc/kiln/examples/hello/default.nix")));
  for (std::string unit : {"kiln-scheduler", "kiln-worker"}) {
    auto text = readFile(usr("lib/systemd/system/" + unit + ".service"));
    EXPECT_THAT(text, HasSubstr("\nExecStart=/usr/bin/kiln ")) << unit;
    EXPECT_THAT(text, HasSubstr("\nUser=kiln\n")) << unit;
    EXPECT_THAT(text, HasSubstr("\nStateDirectory=kiln")) << unit;
  }
#ifdef KILN_HAVE_HELP2MAN
  EXPECT_TRUE(pathExists(usr("share/man/man1/kiln.1.gz")));
  EXPECT_TRUE(pathExists(usr("share/man/man1/kiln-serve.1.gz")));
  EXPECT_TRUE(pathExists(usr("share/man/man1/kiln-store-add.1.gz")));
#endif
}

TEST_F(Installed, BashCompletesCommandsAndOptions) {
  if (!test::haveProgram("bash")) GTEST_SKIP() << "no bash";
  auto complete = [&](const std::string& words, int cword) {
    std::string script =
        "source '" + usr("share/bash-completion/completions/kiln") +
        "'; COMP_WORDS=(" + words + "); COMP_CWORD=" + std::to_string(cword) +
        "; _kiln; printf '%s\\n' \"${COMPREPLY[@]}\"";
    return test::run({"bash", "-c", script}, "",
                     {"PATH=" + usr("bin") + ":/usr/bin:/bin"});
  };
  auto r = complete("kiln sto", 1);
  EXPECT_EQ(r.out, "store\n") << r.err;
  r = complete("kiln store ad", 2);
  EXPECT_EQ(r.out, "add\n") << r.err;
  r = complete("kiln serve --work", 2);
  EXPECT_EQ(r.out, "--workers\n") << r.err;
}

}  // namespace
}  // namespace kiln
