// API tokens (tokens.h): secrets are stored only as salted hashes, checked
// by scope, refused when revoked, wrong or malformed; the requests that
// create, list and revoke them; and editing projects and jobsets.
#include "kiln/scheduler/tokens.h"

#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "kiln/scheduler/service.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {
namespace {

class TokensTest : public ::testing::Test {
 protected:
  // Stores `t` through the request path, as `kiln token create` does.
  int64_t create(const NewToken& t, const std::string& scope) {
    auto r = submitRequest(dir_.path(), "token-create",
                           {{"scope", scope},
                            {"name", "ci"},
                            {"keyId", t.keyId},
                            {"salt", t.salt},
                            {"hash", t.hash}});
    return r["id"].get<int64_t>();
  }
  std::optional<TokenScope> check(const std::string& secret) {
    StateDb db(dir_.path() + "/scheduler.sqlite", StateDb::ReadOnly{});
    return TokenStore(db).check(secret);
  }
  TempDir dir_{"kiln-tokens"};
};

TEST(TokenScopes, IncludeTheLowerOnes) {
  EXPECT_TRUE(scopeAllows(TokenScope::kAdmin, TokenScope::kOperate));
  EXPECT_TRUE(scopeAllows(TokenScope::kOperate, TokenScope::kRead));
  EXPECT_FALSE(scopeAllows(TokenScope::kRead, TokenScope::kOperate));
  EXPECT_FALSE(scopeAllows(TokenScope::kOperate, TokenScope::kAdmin));
  EXPECT_EQ(parseTokenScope("operate"), TokenScope::kOperate);
  EXPECT_FALSE(parseTokenScope("root"));
}

TEST(TokenGeneration, SecretsAndSaltsDifferAndOnlyTheHashIsKept) {
  NewToken a = generateToken(), b = generateToken();
  EXPECT_NE(a.secret, b.secret);
  EXPECT_NE(a.salt, b.salt);
  EXPECT_EQ(a.secret.size(), 86u);
  EXPECT_EQ(a.secret.substr(5, 16), a.keyId);
  EXPECT_EQ(a.hash, hashTokenSecret(a.salt, a.secret));
  EXPECT_NE(a.hash, hashTokenSecret(b.salt, a.secret));  // salted
}

TEST_F(TokensTest, CheckFindsTheScopeOfAValidSecretOnly) {
  NewToken op = generateToken(), rd = generateToken();
  create(op, "operate");
  create(rd, "read");
  EXPECT_EQ(check(op.secret), TokenScope::kOperate);
  EXPECT_EQ(check(rd.secret), TokenScope::kRead);
  std::string wrong = op.secret;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  EXPECT_FALSE(check(wrong));
  EXPECT_FALSE(check(generateToken().secret));  // unknown key id
  EXPECT_FALSE(check(""));
  EXPECT_FALSE(check("kiln_" + op.keyId));
  // The database (and its WAL) holds no secret.
  for (auto suffix : {"", "-wal"}) {
    std::string path = dir_.path() + "/scheduler.sqlite" + suffix;
    if (!pathExists(path)) continue;
    EXPECT_EQ(readFile(path).find(op.secret.substr(22)), std::string::npos);
  }
}

TEST_F(TokensTest, RevokedTokensAreRefusedAndListedWithoutSecrets) {
  NewToken t = generateToken();
  int64_t id = create(t, "admin");
  auto list =
      submitRequest(dir_.path(), "token-list", nlohmann::json::object());
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["scope"], "admin");
  EXPECT_EQ(list[0]["keyId"], t.keyId);
  EXPECT_EQ(list[0]["revokedMs"], 0);
  EXPECT_FALSE(list[0].contains("hash"));
  submitRequest(dir_.path(), "token-revoke", {{"id", id}});
  EXPECT_FALSE(check(t.secret));
  EXPECT_NE(submitRequest(dir_.path(), "token-list",
                          nlohmann::json::object())[0]["revokedMs"],
            0);
  EXPECT_THROW(submitRequest(dir_.path(), "token-revoke", {{"id", id}}),
               SchedulerStateError);
}

TEST_F(TokensTest, CreateRefusesABadScopeOrMalformedHashes) {
  NewToken t = generateToken();
  EXPECT_THROW(create(t, "root"), SchedulerStateError);
  t.hash = "zz";
  EXPECT_THROW(create(t, "read"), SchedulerStateError);
  t = generateToken();
  create(t, "read");
  EXPECT_THROW(create(t, "read"), SchedulerStateError);  // same key id
}

TEST_F(TokensTest, ProjectsAndJobsetsAreEditedThroughRequests) {
  submitRequest(dir_.path(), "project-create", {{"name", "p"}});
  submitRequest(dir_.path(), "jobset-create",
                {{"project", "p"}, {"name", "j"}, {"location", "/src"}});
  auto r = submitRequest(
      dir_.path(), "jobset-update",
      {{"project", "p"}, {"jobset", "j"}, {"shares", 7}, {"enabled", false}});
  EXPECT_EQ(r["shares"], 7);
  EXPECT_EQ(r["location"], "/src");  // unchanged
  EXPECT_THROW(
      submitRequest(dir_.path(), "jobset-update",
                    {{"project", "p"}, {"jobset", "j"}, {"shares", 0}}),
      SchedulerStateError);
  EXPECT_THROW(submitRequest(dir_.path(), "jobset-update",
                             {{"project", "p"}, {"jobset", "nope"}}),
               SchedulerStateError);
  submitRequest(dir_.path(), "project-edit",
                {{"project", "p"}, {"description", "packages"}});
  StateDb db(dir_.path() + "/scheduler.sqlite");
  auto j = db.jobsetByName("p", "j");
  EXPECT_EQ(j->shares, 7);
  EXPECT_FALSE(j->enabled);
  EXPECT_EQ(db.projectByName("p")->description, "packages");
}

}  // namespace
}  // namespace kiln::scheduler
