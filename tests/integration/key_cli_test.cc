// `kiln key generate` writes a usable key pair and refuses to overwrite it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

TEST(KeyCli, GenerateWritesAPrivateSecretAndPrintsThePublicKey) {
  TempDir dir;
  auto out = dir.path() + "/keys";
  auto r = test::run(
      {test::kilnBinary(), "key", "generate", "--out", out, "--name", "w1"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto pub = trimmed(r.out);
  EXPECT_EQ(pub.size(), 40u);
  EXPECT_THAT(readFile(out + "/w1.pub"), HasSubstr(pub));
  struct stat st;
  ASSERT_EQ(::stat((out + "/w1.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  r = test::run(
      {test::kilnBinary(), "key", "generate", "--out", out, "--name", "w1"});
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.err, HasSubstr("already exists (use --force to replace it)"));
  r = test::run({test::kilnBinary(), "key", "generate", "--out", out, "--name",
                 "w1", "--force", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"publicKey\":\""));
  EXPECT_NE(readFile(out + "/w1.pub").find(pub),
            0u);  // a new key replaced the old one

  EXPECT_EQ(
      test::run({test::kilnBinary(), "key", "generate", "--help"}).exitCode, 0);
  EXPECT_EQ(
      test::run({test::kilnBinary(), "key", "generate", "--bogus"}).exitCode,
      2);
}

}  // namespace
}  // namespace kiln
