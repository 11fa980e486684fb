// The forges' webhooks (forge_events.h, api_forge.cc): each forge's
// signature is checked against the project's secret file; a bad or
// missing one is a 401 that queues nothing; a replayed delivery id is
// ignored; payloads (fixtures written from the documented field names,
// tests/data/forge/) become the `forge-event` request's arguments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api_request.h"
#include "forge_events.h"
#include "hmac.h"
#include "kiln/common/file.h"
#include "kiln/scheduler/forge_store.h"
#include "kiln/scheduler/service.h"
#include "kiln/web/api.h"
#include "test_support.h"
#include "web_fixture.h"

namespace kiln::web {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string fixture(const std::string& name) {
  return readFile(test::sourceDir() + "/tests/data/forge/" + name);
}

// A request of `forge`'s shape: event header, delivery id, body, signed
// with `secret` (GitHub, Gitea: HMAC; GitLab: the token).
Request forgeRequest(Forge forge, const std::string& event,
                     const std::string& body, const std::string& secret,
                     const std::string& delivery) {
  Request r;
  r.method = "POST";
  r.path = std::string("/api/webhook/") + forgeName(forge);
  r.body = body;
  r.headers["content-type"] = "application/json";
  std::string mac = hmacSha256Hex(secret, body);
  switch (forge) {
    case Forge::kGithub:
      r.headers["x-github-event"] = event;
      r.headers["x-github-delivery"] = delivery;
      if (!secret.empty()) r.headers["x-hub-signature-256"] = "sha256=" + mac;
      break;
    case Forge::kGitea:
      r.headers["x-gitea-event"] = event;
      r.headers["x-gitea-delivery"] = delivery;
      if (!secret.empty()) r.headers["x-gitea-signature"] = mac;
      break;
    case Forge::kGitlab:
      r.headers["x-gitlab-event"] = event;
      r.headers["x-gitlab-event-uuid"] = delivery;
      if (!secret.empty()) r.headers["x-gitlab-token"] = secret;
      break;
  }
  return r;
}

TEST(ForgeEvents, SignaturesOfEachForge) {
  std::string body = fixture("github_push.json");
  for (Forge f : {Forge::kGithub, Forge::kGitea, Forge::kGitlab}) {
    Request ok = forgeRequest(f, "push", body, "s3cret", "d1");
    EXPECT_TRUE(forgeSignatureValid(f, ok, "s3cret")) << forgeName(f);
    EXPECT_FALSE(forgeSignatureValid(f, ok, "other")) << forgeName(f);
    EXPECT_FALSE(forgeSignatureValid(f, ok, "")) << forgeName(f);
    Request unsigned_ = forgeRequest(f, "push", body, "", "d1");
    EXPECT_FALSE(forgeSignatureValid(f, unsigned_, "s3cret")) << forgeName(f);
    if (f != Forge::kGitlab) {  // the HMAC covers the body
      ok.body += " ";
      EXPECT_FALSE(forgeSignatureValid(f, ok, "s3cret")) << forgeName(f);
    }
  }
  // Forgejo's own header names.
  Request fj = forgeRequest(Forge::kGitea, "push", body, "", "");
  fj.headers["x-forgejo-signature"] = hmacSha256Hex("k", body);
  fj.headers["x-forgejo-delivery"] = "fj-1";
  EXPECT_TRUE(forgeSignatureValid(Forge::kGitea, fj, "k"));
  EXPECT_EQ(forgeDeliveryId(Forge::kGitea, fj), "fj-1");
}

TEST(ForgeEvents, ParsesPushesAndPullRequests) {
  auto push = parseForgeEvent(
      Forge::kGithub, forgeRequest(Forge::kGithub, "push",
                                   fixture("github_push.json"), "k", "1"));
  EXPECT_EQ(push.kind, ForgeEvent::Kind::kPush);
  EXPECT_EQ(push.branch, "main");
  EXPECT_EQ(push.sha, std::string(40, '2'));
  EXPECT_EQ(push.repo, "octo/pkgs");
  EXPECT_THAT(push.urls,
              ::testing::Contains("https://github.example/octo/pkgs.git"));

  auto pr = parseForgeEvent(
      Forge::kGithub,
      forgeRequest(Forge::kGithub, "pull_request",
                   fixture("github_pull_request.json"), "k", "2"));
  EXPECT_EQ(pr.kind, ForgeEvent::Kind::kPullRequest);
  EXPECT_EQ(pr.action, "open");
  EXPECT_EQ(pr.number, 7);
  EXPECT_EQ(pr.branch, "main");
  EXPECT_EQ(pr.sha, std::string(40, '3'));
  EXPECT_EQ(pr.headUrl, "https://github.example/fork/pkgs.git");
  EXPECT_EQ(pr.headRef, "refs/pull/7/head");

  auto gitea = parseForgeEvent(
      Forge::kGitea,
      forgeRequest(Forge::kGitea, "pull_request",
                   fixture("gitea_pull_request.json"), "k", "3"));
  EXPECT_EQ(gitea.action, "update");
  EXPECT_EQ(gitea.number, 3);

  auto mr = parseForgeEvent(
      Forge::kGitlab,
      forgeRequest(Forge::kGitlab, "Merge Request Hook",
                   fixture("gitlab_merge_request.json"), "k", "4"));
  EXPECT_EQ(mr.kind, ForgeEvent::Kind::kPullRequest);
  EXPECT_EQ(mr.action, "update");
  EXPECT_EQ(mr.number, 5);
  EXPECT_EQ(mr.sha, std::string(40, '6'));
  EXPECT_EQ(mr.headRef, "refs/merge-requests/5/head");
  EXPECT_EQ(mr.repo, "group/pkgs");

  // A deleted branch, an unknown event, a label change: nothing to do.
  EXPECT_EQ(parseForgeEvent(Forge::kGitlab,
                            forgeRequest(Forge::kGitlab, "Push Hook",
                                         fixture("gitlab_push.json"), "k", "5"))
                .kind,
            ForgeEvent::Kind::kIgnored);
  EXPECT_EQ(
      parseForgeEvent(Forge::kGithub,
                      forgeRequest(Forge::kGithub, "issues", "{}", "k", "6"))
          .kind,
      ForgeEvent::Kind::kIgnored);
  json labels = json::parse(fixture("gitlab_merge_request.json"));
  labels["object_attributes"].erase("oldrev");
  EXPECT_EQ(parseForgeEvent(Forge::kGitlab,
                            forgeRequest(Forge::kGitlab, "Merge Request Hook",
                                         labels.dump(), "k", "7"))
                .kind,
            ForgeEvent::Kind::kIgnored);
  // Not the documented shape: 400.
  json bad = json::parse(fixture("github_pull_request.json"));
  bad["pull_request"]["head"].erase("sha");
  EXPECT_THROW(parseForgeEvent(Forge::kGithub,
                               forgeRequest(Forge::kGithub, "pull_request",
                                            bad.dump(), "k", "8")),
               HttpError);
  EXPECT_THROW(
      parseForgeEvent(Forge::kGithub,
                      forgeRequest(Forge::kGithub, "push", "[1]", "k", "9")),
      HttpError);
}

TEST(ForgeEvents, NormalizesRepositoryUrls) {
  using scheduler::normalizeRepoUrl;
  EXPECT_EQ(normalizeRepoUrl("https://GitHub.example/octo/pkgs.git"),
            "github.example/octo/pkgs");
  EXPECT_EQ(normalizeRepoUrl("git@github.example:octo/pkgs.git"),
            "github.example/octo/pkgs");
  EXPECT_EQ(normalizeRepoUrl("ssh://git@github.example/octo/pkgs/"),
            "github.example/octo/pkgs");
  EXPECT_EQ(normalizeRepoUrl("/srv/git/pkgs.git"), "/srv/git/pkgs");
}

class ForgeWebhookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_.stateDir = fx_.stateDir();
    ctx_.enqueue = [this](const std::string& kind, const json& args) {
      queued_.emplace_back(kind, args);
      return static_cast<int64_t>(queued_.size());
    };
    addApiRoutes(router_, ctx_);
    writeFile(secretFile_, "s3cret\n");
    scheduler::submitRequest(
        ctx_.stateDir, "project-webhook",
        {{"project", "nixpkgs"}, {"secretFile", secretFile_}});
  }

  testing::WebFixture fx_;
  TempDir tmp_;
  std::string secretFile_ = tmp_.path() + "/secret";
  WebContext ctx_;
  Router router_;
  std::vector<std::pair<std::string, json>> queued_;
};

TEST_F(ForgeWebhookTest, SignedEventsAreQueuedOnce) {
  std::string body = fixture("github_pull_request.json");
  Response r = router_.handle(
      forgeRequest(Forge::kGithub, "pull_request", body, "s3cret", "abc"));
  ASSERT_EQ(r.status, 202) << r.body;
  ASSERT_EQ(queued_.size(), 1u);
  EXPECT_EQ(queued_[0].first, "forge-event");
  EXPECT_EQ(queued_[0].second["forge"], "github");
  EXPECT_EQ(queued_[0].second["delivery"], "abc");
  EXPECT_EQ(queued_[0].second["projects"], json::array({"nixpkgs"}));
  EXPECT_EQ(queued_[0].second["event"]["number"], 7);
  // The same delivery again: ignored, nothing queued.
  Response again = router_.handle(
      forgeRequest(Forge::kGithub, "pull_request", body, "s3cret", "abc"));
  EXPECT_EQ(again.status, 200);
  EXPECT_THAT(again.body, HasSubstr("received before"));
  EXPECT_EQ(queued_.size(), 1u);
  // GitLab's token, Gitea's HMAC.
  EXPECT_EQ(router_
                .handle(forgeRequest(Forge::kGitlab, "Merge Request Hook",
                                     fixture("gitlab_merge_request.json"),
                                     "s3cret", "u-1"))
                .status,
            202);
  EXPECT_EQ(router_
                .handle(forgeRequest(Forge::kGitea, "pull_request",
                                     fixture("gitea_pull_request.json"),
                                     "s3cret", "g-1"))
                .status,
            202);
  EXPECT_EQ(queued_.size(), 3u);
}

TEST_F(ForgeWebhookTest, BadOrMissingSignatureIs401AndQueuesNothing) {
  std::string body = fixture("github_push.json");
  for (Forge f : {Forge::kGithub, Forge::kGitea, Forge::kGitlab}) {
    for (std::string secret : {"wrong", ""}) {
      Response r = router_.handle(forgeRequest(f, "push", body, secret, "x"));
      EXPECT_EQ(r.status, 401) << forgeName(f) << " " << r.body;
    }
  }
  // A body altered after signing.
  Request r = forgeRequest(Forge::kGithub, "push", body, "s3cret", "y");
  r.body.replace(r.body.find("main"), 4, "evil");
  EXPECT_EQ(router_.handle(r).status, 401);
  EXPECT_TRUE(queued_.empty());
  // A 401 does not burn the delivery id: the genuine one still goes.
  EXPECT_EQ(
      router_.handle(forgeRequest(Forge::kGithub, "push", body, "s3cret", "x"))
          .status,
      202);
}

TEST_F(ForgeWebhookTest, BoundsAndUnknownForges) {
  std::string big(2 << 20, ' ');
  Response r =
      router_.handle(forgeRequest(Forge::kGithub, "push", big, "s3cret", "b"));
  EXPECT_EQ(r.status, 413);
  Request other = forgeRequest(Forge::kGithub, "push", "{}", "s3cret", "c");
  other.path = "/api/webhook/bitbucket";
  EXPECT_EQ(router_.handle(other).status, 404);
  // Signed, but without a delivery id.
  Request noId = forgeRequest(Forge::kGithub, "push", "{}", "s3cret", "");
  EXPECT_EQ(router_.handle(noId).status, 400);
  // A ping is answered, nothing queued.
  EXPECT_EQ(router_
                .handle(forgeRequest(Forge::kGithub, "ping", "{\"zen\":\"x\"}",
                                     "s3cret", "p"))
                .status,
            200);
  EXPECT_TRUE(queued_.empty());
}

}  // namespace
}  // namespace kiln::web
