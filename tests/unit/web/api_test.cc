// The write API (api.h) through the router, against the fixture state
// directory with no scheduler running (requests then apply directly, as
// for the CLI): every mutation without a token is a 401, with a read
// token a 403, and with the right scope it is done and visible in the
// state; bodies are validated; the push webhook checks its HMAC.
#include "kiln/web/api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "api_request.h"
#include "kiln/common/encoding.h"
#include "kiln/plugin_host/registry.h"
#include "kiln/scheduler/service.h"
#include "kiln/scheduler/tokens.h"
#include "kiln/web/pages.h"
#include "web_fixture.h"

namespace kiln::web {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_.stateDir = fx_.stateDir();
    ctx_.pushSecret = "push-key";
    ctx_.checkEvaluator =
        scheduler::loadedEvaluatorCheck(plugins::processPlugins());
    addPageRoutes(router_, ctx_);
    addApiRoutes(router_, ctx_);
    for (auto scope : {"read", "operate", "admin"}) {
      auto t = scheduler::generateToken();
      scheduler::submitRequest(ctx_.stateDir, "token-create",
                               {{"scope", scope},
                                {"keyId", t.keyId},
                                {"salt", t.salt},
                                {"hash", t.hash}});
      tokens_[scope] = t.secret;
    }
  }

  Response call(const std::string& method, const std::string& path,
                const std::string& body, const std::string& token = "",
                const std::string& type = "application/json") {
    Request r;
    r.method = method;
    r.path = path;
    r.body = body;
    r.headers["content-type"] = type;
    if (!token.empty()) r.headers["authorization"] = "Bearer " + token;
    return router_.handle(r);
  }
  Response post(const std::string& path, const std::string& body,
                const std::string& scope = "") {
    return call("POST", path, body, scope.empty() ? "" : tokens_.at(scope));
  }
  scheduler::BuildRow build(int64_t id) { return *db().build(id); }
  scheduler::StateDb& db() {
    if (!db_)
      db_ = std::make_unique<scheduler::StateDb>(ctx_.stateDir +
                                                 "/scheduler.sqlite");
    return *db_;
  }
  // Expects 401 without a token and 403 with a read token.
  void expectRefused(const std::string& method, const std::string& path,
                     const std::string& body) {
    Response none = call(method, path, body);
    EXPECT_EQ(none.status, 401) << path << ": " << none.body;
    EXPECT_THAT(none.header("WWW-Authenticate"), HasSubstr("Bearer"));
    Response read = call(method, path, body, tokens_.at("read"));
    EXPECT_EQ(read.status, 403) << path << ": " << read.body;
    EXPECT_EQ(call(method, path, body, "kiln_bogus").status, 403);
  }

  testing::WebFixture fx_;
  WebContext ctx_;
  Router router_;
  std::map<std::string, std::string> tokens_;
  std::unique_ptr<scheduler::StateDb> db_;
};

std::string path(const char* fmt, int64_t id) {
  std::string s = fmt;
  return s.replace(s.find("{}"), 2, std::to_string(id));
}

TEST_F(ApiTest, CancelNeedsAnOperateTokenAndCancels) {
  std::string p = path("/api/build/{}/cancel", fx_.bash);
  expectRefused("POST", p, "");
  EXPECT_FALSE(build(fx_.bash).finished);  // nothing changed
  Response r = post(p, "", "operate");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["status"], "cancelled");
  EXPECT_EQ(build(fx_.bash).status, 4);
  EXPECT_EQ(post(p, "", "operate").status, 409);  // already finished
}

TEST_F(ApiTest, RestartAndBumpAreDoneWithTheRightScope) {
  std::string restart = path("/api/build/{}/restart", fx_.hello);
  std::string bump = path("/api/build/{}/bump", fx_.hello);
  expectRefused("POST", restart, "");
  expectRefused("POST", bump, R"({"priority": 50})");
  EXPECT_TRUE(build(fx_.hello).finished);
  EXPECT_EQ(build(fx_.hello).globalPriority, 0);
  ASSERT_EQ(post(restart, "{}", "operate").status, 200);
  EXPECT_FALSE(build(fx_.hello).finished);
  ASSERT_EQ(post(bump, R"({"priority": 50})", "admin").status, 200);
  EXPECT_EQ(build(fx_.hello).globalPriority, 50);
  EXPECT_EQ(post(bump, R"({"priority": -1})", "operate").status, 400);
  EXPECT_EQ(post(bump, R"({"priority": "x"})", "operate").status, 400);
}

TEST_F(ApiTest, UnknownBuildIsA404) {
  for (auto what : {"cancel", "restart", "bump"}) {
    Response r = post(std::string("/api/build/999999/") + what, "", "operate");
    EXPECT_EQ(r.status, 404) << what << ": " << r.body;
  }
  EXPECT_EQ(post("/api/build/abc/cancel", "", "operate").status, 400);
}

TEST_F(ApiTest, ClearingCachedFailuresNeedsOperate) {
  db().addCachedFailure({fx_.drv("gcc"), 1, 1, 0});
  expectRefused("POST", "/api/cached-failures/clear", "{}");
  EXPECT_EQ(db().cachedFailures().size(), 1u);
  Response r = post("/api/cached-failures/clear",
                    json{{"drvPath", fx_.drv("gcc")}}.dump(), "operate");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["cleared"], 1);
  EXPECT_TRUE(db().cachedFailures().empty());
}

TEST_F(ApiTest, ProjectsAndJobsetsNeedAdmin) {
  std::string project = R"({"name": "hydra", "description": "d"})";
  std::string jobset = R"({"name": "main", "location": "/src/h"})";
  expectRefused("POST", "/api/projects", project);
  EXPECT_EQ(post("/api/projects", project, "operate").status, 403);
  EXPECT_FALSE(db().projectByName("hydra"));
  ASSERT_EQ(post("/api/projects", project, "admin").status, 201);
  EXPECT_EQ(db().projectByName("hydra")->description, "d");

  expectRefused("POST", "/api/project/hydra/jobsets", jobset);
  ASSERT_EQ(post("/api/project/hydra/jobsets", jobset, "admin").status, 201);
  EXPECT_EQ(db().jobsetByName("hydra", "main")->location, "/src/h");

  std::string edit = R"({"shares": 3, "enabled": false})";
  expectRefused("PUT", "/api/jobset/hydra/main", edit);
  EXPECT_EQ(db().jobsetByName("hydra", "main")->shares, 100);
  Response r = call("PUT", "/api/jobset/hydra/main", edit, tokens_["admin"]);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(db().jobsetByName("hydra", "main")->shares, 3);
  EXPECT_FALSE(db().jobsetByName("hydra", "main")->enabled);
  EXPECT_EQ(
      call("PUT", "/api/jobset/hydra/nope", edit, tokens_["admin"]).status,
      404);
  r = call("PUT", "/api/project/hydra", R"({"description": "e"})",
           tokens_["admin"]);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(db().projectByName("hydra")->description, "e");
  // A taken name is the caller's conflict, an invalid one a bad request.
  EXPECT_EQ(post("/api/projects", project, "admin").status, 409);
  EXPECT_EQ(post("/api/projects", R"({"name": "a b"})", "admin").status, 400);
}

TEST_F(ApiTest, EvaluationIsQueuedForTheScheduler) {
  std::string p = "/api/jobset/nixpkgs/trunk/eval";
  expectRefused("POST", p, "{}");
  EXPECT_TRUE(db().pendingRequests().empty());
  Response r = post(p, "{}", "operate");
  ASSERT_EQ(r.status, 202) << r.body;
  int64_t id = json::parse(r.body)["request"];
  auto pending = db().pendingRequests();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].kind, "jobset-eval");
  EXPECT_EQ(json::parse(pending[0].args)["jobset"], "trunk");
  Response s = call("GET", "/api/request/" + std::to_string(id), "");
  EXPECT_EQ(json::parse(s.body)["done"], false);
  EXPECT_EQ(post("/api/jobset/nixpkgs/nope/eval", "{}", "operate").status, 404);
  EXPECT_EQ(call("GET", "/api/request/999", "").status, 404);
  // Token requests (which carry hashes) are not shown.
  int64_t t = db().addRequest("token-list", "{}");
  EXPECT_EQ(call("GET", "/api/request/" + std::to_string(t), "").status, 404);
}

TEST_F(ApiTest, MalformedOrOversizedBodiesAreClear400s) {
  std::string p = path("/api/build/{}/bump", fx_.hello);
  Response r = post(p, "{\"priority\": ", "operate");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("malformed JSON"));
  EXPECT_EQ(post(p, "[1]", "operate").status, 400);
  r = post(p, R"({"priorty": 1})", "operate");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("unknown field 'priorty'"));
  EXPECT_EQ(post(p, std::string(kMaxApiBody + 1, ' '), "operate").status, 413);
  EXPECT_EQ(build(fx_.hello).globalPriority, 0);
}

TEST_F(ApiTest, HtmlFormsPostWithTheirTokenAndRedirectBack) {
  Response page = call("GET", path("/build/{}", fx_.bash), "");
  EXPECT_THAT(
      page.body,
      HasSubstr("action=\"" + path("/api/build/{}/cancel", fx_.bash) + "\""));
  EXPECT_THAT(page.body, HasSubstr("name=\"token\""));
  std::string p = path("/api/build/{}/cancel", fx_.bash);
  Response r = call("POST", p, "token=" + tokens_["operate"], "",
                    "application/x-www-form-urlencoded");
  ASSERT_EQ(r.status, 303) << r.body;
  EXPECT_EQ(r.header("Location"), path("/build/{}", fx_.bash));
  EXPECT_EQ(build(fx_.bash).status, 4);
}

std::string sign(const std::string& key, const std::string& body) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), int(key.size()),
       reinterpret_cast<const unsigned char*>(body.data()), body.size(), mac,
       &len);
  return "sha256=" + base16Encode(std::string_view((char*)mac, len));
}

// A push is signed over its timestamp, its jobset and its body: a valid
// one triggers once; the same signature again (a replay), on another
// jobset (retargeted), with an old timestamp or a body-only signature
// (GitHub's) is refused and triggers nothing.
TEST_F(ApiTest, PushWebhookTriggersOnlyWithAFreshSignatureForItsJobset) {
  FakeClock clock(WallTime(std::chrono::seconds(1'800'000'000)));
  ctx_.clock = &clock;
  scheduler::submitRequest(ctx_.stateDir, "jobset-create",
                           {{"project", "nixpkgs"},
                            {"name", "staging"},
                            {"location", "/src/nixpkgs"}});
  std::string body = R"({"ref": "refs/heads/main"})";
  auto push = [&](const std::string& jobset, const std::string& stamp,
                  const std::string& sig) {
    Request r;
    r.method = "POST";
    r.path = "/api/push/nixpkgs/" + jobset;
    r.body = body;
    if (!sig.empty()) r.headers["x-kiln-signature-256"] = sig;
    if (!stamp.empty()) r.headers["x-kiln-timestamp"] = stamp;
    return router_.handle(r);
  };
  auto message = [&](const std::string& stamp, const std::string& jobset) {
    return stamp + "\nnixpkgs\n" + jobset + "\n" + body;
  };
  std::string now = "1800000000";
  std::string good = sign("push-key", message(now, "trunk"));
  EXPECT_EQ(push("trunk", now, "").status, 403);
  EXPECT_EQ(push("trunk", "", good).status, 403);
  EXPECT_EQ(push("trunk", now, sign("other-key", message(now, "trunk"))).status,
            403);
  EXPECT_EQ(push("trunk", now, "sha256=zz").status, 403);
  Response bodyOnly = push("trunk", now, sign("push-key", body));
  EXPECT_EQ(bodyOnly.status, 403);
  EXPECT_THAT(bodyOnly.body, HasSubstr("does not match"));
  // Retargeted: trunk's signature on staging.
  EXPECT_EQ(push("staging", now, good).status, 403);
  // A timestamp changed after signing, and one too old though signed.
  EXPECT_EQ(push("trunk", "1800000001", good).status, 403);
  std::string old = "1799999000";
  Response stale = push("trunk", old, sign("push-key", message(old, "trunk")));
  EXPECT_EQ(stale.status, 403);
  EXPECT_THAT(stale.body, HasSubstr("from the server's clock"));
  EXPECT_TRUE(db().pendingRequests().empty());

  Response r = push("trunk", now, good);
  ASSERT_EQ(r.status, 202) << r.body;
  auto pending = db().pendingRequests();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(json::parse(pending[0].args)["ifChanged"], true);
  EXPECT_EQ(json::parse(pending[0].args)["jobset"], "trunk");
  Response replay = push("trunk", now, good);
  EXPECT_EQ(replay.status, 403);
  EXPECT_THAT(replay.body, HasSubstr("replay"));
  // A new push a little later is its own, for either jobset.
  clock.advance(std::chrono::seconds(30));
  std::string later = "1800000030";
  EXPECT_EQ(push("staging", later, sign("push-key", message(later, "staging")))
                .status,
            202);
  EXPECT_EQ(db().pendingRequests().size(), 2u);
  ctx_.pushSecret.clear();  // no secret: every push is refused
  EXPECT_EQ(push("trunk", later, sign("", message(later, "trunk"))).status, 403);
}

TEST_F(ApiTest, PrivateReadsNeedAReadToken) {
  router_.setGuard(privateReadGuard(ctx_));
  Response r = call("GET", "/api/overview", "");
  EXPECT_EQ(r.status, 401);
  EXPECT_THAT(r.header("WWW-Authenticate"), HasSubstr("Bearer"));
  EXPECT_EQ(call("GET", "/api/overview", "", "kiln_bogus").status, 403);
  EXPECT_EQ(call("GET", "/api/overview", "", tokens_["read"]).status, 200);
  // Mutations still check their own scope.
  EXPECT_EQ(post(path("/api/build/{}/cancel", fx_.bash), "", "read").status,
            403);
}

}  // namespace
}  // namespace kiln::web
