// `kiln plugins`: lists what the loader finds (the in-tree plugins, the
// evaluators included, from the
// build tree, without installing) and every refused library with the
// reason, exiting 1 when something was refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

TEST(PluginsCli, ListsTheInTreePluginsFromTheBuildTree) {
  auto r =
      test::run({test::kilnBinary(), "plugins"}, "", {"KILN_PLUGIN_PATH="});
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("searched: " + test::binaryDir() +
                               "/plugins/lib"));
  EXPECT_THAT(r.out, testing::ContainsRegex(
                         "sandbox +linux +1\\.0\\.0 +1\\.5 +[^ ]*/plugins/lib/"
                         "kiln-plugin-linux\\.so"));
  EXPECT_THAT(r.out, testing::ContainsRegex("sandbox +none "));
  EXPECT_THAT(r.out,
              testing::ContainsRegex(
                  "platform +native +1\\.0\\.0 +1\\.5 +[^ ]*/plugins/lib/"
                  "kiln-plugin-native\\.so"));
  EXPECT_THAT(r.out, testing::ContainsRegex("platform +qemu-user "));
  EXPECT_THAT(r.out, testing::ContainsRegex(
                         "notifier +webhook +1\\.1\\.0 +1\\.5 +[^ ]*/plugins/"
                         "lib/kiln-plugin-webhook\\.so"));
  EXPECT_THAT(r.out, testing::ContainsRegex("notifier +command "));
  EXPECT_THAT(r.out, testing::ContainsRegex(
                         "evaluator +builtin +1\\.0\\.0 +1\\.5 +[^ ]*/plugins/"
                         "lib/kiln-plugin-builtin\\.so"));
  EXPECT_THAT(r.out, testing::ContainsRegex("evaluator +nix +1\\.0\\.0 "));
}

TEST(PluginsCli, NamesRefusedLibrariesAndFails) {
  std::string dir = test::binaryDir() + "/tests/plugins/major";
  auto r = test::run({test::kilnBinary(), "plugins", "--plugin-dir", dir});
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("refused " + dir +
                               "/kiln-plugin-test-major.so: built for plugin "
                               "ABI 2."));
}

TEST(PluginsCli, ShowsEveryKindAndThePreviousMinor) {
  std::string dir = test::binaryDir() + "/tests/plugins/good";
  auto r = test::run({test::kilnBinary(), "plugins", "--plugin-dir", dir});
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_THAT(
      r.out, testing::ContainsRegex("sandbox +test-minor0 +0\\.0\\.1 +1\\.0 "));
  EXPECT_THAT(r.out, testing::ContainsRegex("notifier +test-notifier "));
}

}  // namespace
}  // namespace kiln
