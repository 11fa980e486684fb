// The API tokens a `kiln serve` configuration declares (cli/src/
// serve_tokens.h): secrets read from or made in their files, and the
// requests that make the state's tokens match.
#include "serve_tokens.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "kiln/common/file.h"

namespace kiln::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kSecret = "kiln_0123456789abcdef_" + std::string(64, 'a');

ConfiguredToken token(const std::string& name, const std::string& scope,
                      const std::string& file = "/etc/kiln/t") {
  return ConfiguredToken{name, scope, file};
}

// The state's row for `secret`, stored as `name` with `scope`.
scheduler::TokenRow row(int64_t id, const std::string& secret,
                        const std::string& name, scheduler::TokenScope scope) {
  scheduler::TokenRow r;
  r.id = id;
  r.keyId = secret.substr(5, 16);
  r.name = name;
  r.scope = scope;
  r.salt = "00112233445566778899aabbccddeeff";
  r.hash = scheduler::hashTokenSecret(r.salt, secret);
  return r;
}

std::string fixedSalt() { return "ffeeddccbbaa99887766554433221100"; }

TEST(ServeTokensTest, AMissingSecretFileIsMadePrivateAndReadBack) {
  TempDir dir;
  auto t = token("ci", "operate", dir.path() + "/ci.secret");
  std::string made = declaredTokenSecret(t);
  EXPECT_THAT(made, ::testing::MatchesRegex("kiln_[0-9a-f]{16}_[0-9a-f]{64}"));
  struct stat st;
  ASSERT_EQ(::stat(t.secretFile.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(readFile(t.secretFile), made + "\n");
  EXPECT_EQ(declaredTokenSecret(t), made);
}

TEST(ServeTokensTest, AFileWithoutATokenIsRefusedByName) {
  TempDir dir;
  auto t = token("ci", "read", dir.path() + "/ci.secret");
  writeFile(t.secretFile, "hunter2\n");
  try {
    declaredTokenSecret(t);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("token ci: " + t.secretFile +
                                    " does not hold a token"));
  }
}

TEST(ServeTokensTest, ANewSecretIsCreatedWithItsSaltedHash) {
  auto plan = planTokens({{token("ci", "operate"), kSecret}}, {}, fixedSalt);
  ASSERT_EQ(plan.requests.size(), 1u);
  EXPECT_EQ(plan.requests[0].first, "token-create");
  const auto& a = plan.requests[0].second;
  EXPECT_EQ(a["name"], "config:ci");
  EXPECT_EQ(a["scope"], "operate");
  EXPECT_EQ(a["keyId"], "0123456789abcdef");
  EXPECT_EQ(a["salt"], fixedSalt());
  EXPECT_EQ(a["hash"], scheduler::hashTokenSecret(fixedSalt(), kSecret));
  EXPECT_THAT(plan.changes, ElementsAre("added token ci (operate)"));
  EXPECT_TRUE(plan.problems.empty());
}

TEST(ServeTokensTest, AStoredTokenIsKeptAndUndeclaredOnesAreRevoked) {
  std::string other = "kiln_fedcba9876543210_" + std::string(64, 'b');
  std::string cli = "kiln_1111111111111111_" + std::string(64, 'c');
  auto plan =
      planTokens({{token("ci", "operate"), kSecret}},
                 {row(1, kSecret, "config:ci", scheduler::TokenScope::kOperate),
                  row(2, other, "config:old", scheduler::TokenScope::kAdmin),
                  row(3, cli, "made by hand", scheduler::TokenScope::kAdmin)},
                 fixedSalt);
  ASSERT_EQ(plan.requests.size(), 1u);
  EXPECT_EQ(plan.requests[0].first, "token-revoke");
  EXPECT_EQ(plan.requests[0].second["id"], 2);
  EXPECT_THAT(plan.changes, ElementsAre("revoked token old (no longer "
                                        "declared)"));
  EXPECT_TRUE(plan.problems.empty());
}

TEST(ServeTokensTest, AChangedScopeRevokesAndAsksForANewSecret) {
  auto plan = planTokens(
      {{token("ci", "admin"), kSecret}},
      {row(7, kSecret, "config:ci", scheduler::TokenScope::kRead)}, fixedSalt);
  ASSERT_EQ(plan.requests.size(), 1u);
  EXPECT_EQ(plan.requests[0].first, "token-revoke");
  EXPECT_EQ(plan.requests[0].second["id"], 7);
  EXPECT_THAT(plan.problems,
              ElementsAre(HasSubstr("token ci: its scope changed from read "
                                    "to admin")));
}

TEST(ServeTokensTest, RevokedOrForeignSecretsAreReportedNotUsed) {
  auto revoked = row(4, kSecret, "config:ci", scheduler::TokenScope::kRead);
  revoked.revokedMs = 1000;
  auto plan =
      planTokens({{token("ci", "read"), kSecret}}, {revoked}, fixedSalt);
  EXPECT_TRUE(plan.requests.empty());
  EXPECT_THAT(plan.problems, ElementsAre(HasSubstr("was revoked")));

  auto foreign = row(5, kSecret, "config:ci", scheduler::TokenScope::kRead);
  foreign.hash = std::string(64, '0');
  plan = planTokens({{token("ci", "read"), kSecret}}, {foreign}, fixedSalt);
  EXPECT_TRUE(plan.requests.empty());
  EXPECT_THAT(plan.problems, ElementsAre(HasSubstr("belongs to another")));
}

}  // namespace
}  // namespace kiln::cli
