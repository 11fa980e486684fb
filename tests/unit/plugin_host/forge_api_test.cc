// The forges' commit status requests (plugins/notify_forge/forge_api.h):
// each forge's documented endpoint, token header and fields; events of
// other forges' or undriven jobsets are not posted; rate-limit answers
// give the time to wait until, bounded.
#include "forge_api.h"

#include <gtest/gtest.h>

namespace kiln::plugin::forge {
namespace {

using nlohmann::json;

json event(const std::string& kind, const std::string& forge) {
  return {
      {"event", kind},
      {"jobset",
       {{"name", "pr-7"},
        {"project", "ci"},
        {"forge", {{"forge", forge}, {"repo", "group/pkgs"}, {"number", 7}}}}},
      {"eval", {{"id", 12}, {"inputsHash", "git:" + std::string(40, 'a')}}},
      {"counts",
       {{"builds", 3}, {"finished", 3}, {"succeeded", 2}, {"failed", 1}}},
      {"baseEval", 10}};
}

TEST(ForgeApi, EachForgesStatusRequest) {
  std::string sha(40, 'a');
  auto gh = statusRequest(Api::kGithub, event("eval.done", "github"),
                          {"", "http://kiln", "tok", {}});
  ASSERT_TRUE(gh);
  EXPECT_EQ(gh->path, "/repos/group/pkgs/statuses/" + sha);
  EXPECT_EQ(gh->body["state"], "failure");
  EXPECT_EQ(gh->body["context"], "kiln/ci:pr-7");
  EXPECT_EQ(gh->body["description"], "2 succeeded, 1 failed of 3 jobs");
  EXPECT_EQ(gh->body["target_url"], "http://kiln/eval/12/compare?base=10");

  auto gt = statusRequest(Api::kGitea, event("eval.failed", "gitea"),
                          {"/api/v1", "", "tok", {}});
  ASSERT_TRUE(gt);
  EXPECT_EQ(gt->path, "/api/v1/repos/group/pkgs/statuses/" + sha);
  EXPECT_EQ(gt->body["state"], "error");
  EXPECT_FALSE(gt->body.contains("target_url"));

  auto gl = statusRequest(Api::kGitlab, event("eval.done", "gitlab"),
                          {"/api/v4", "", "tok", {}});
  ASSERT_TRUE(gl);
  EXPECT_EQ(gl->path, "/api/v4/projects/group%2Fpkgs/statuses/" + sha);
  EXPECT_EQ(gl->body["state"], "failed");
  EXPECT_EQ(gl->body["name"], "kiln/ci:pr-7");
  bool token = false;
  for (auto& [k, v] : gl->headers)
    token = token || (k == "PRIVATE-TOKEN" && v == "tok");
  EXPECT_TRUE(token);
}

TEST(ForgeApi, OtherEventsAndForgesAreNotPosted) {
  StatusSettings t{"", "", "t", {}};
  EXPECT_FALSE(statusRequest(Api::kGithub, event("eval.done", "gitlab"), t));
  EXPECT_FALSE(
      statusRequest(Api::kGithub, event("build.finished", "github"), t));
  json undriven = event("eval.done", "github");
  undriven["jobset"].erase("forge");
  EXPECT_FALSE(statusRequest(Api::kGithub, undriven, t));
  json hostile = event("eval.done", "github");
  hostile["jobset"]["forge"]["repo"] = "../../admin";
  EXPECT_FALSE(statusRequest(Api::kGithub, hostile, t));
  json pathHash = event("eval.done", "github");
  pathHash["eval"]["inputsHash"] = "sha256:abc";
  EXPECT_FALSE(statusRequest(Api::kGithub, pathHash, t));
}

// A build event as the scheduler writes it (docs/operations.md).
json buildEvent(const std::string& kind, const std::string& forge,
                const std::string& job, int status) {
  json b{{"id", 41},
         {"eval", 12},
         {"job", job},
         {"jobset",
          {{"name", "pr-7"},
           {"project", "ci"},
           {"forge", {{"forge", forge}, {"repo", "group/pkgs"}}}}}};
  if (kind == "build.finished") {
    b["status"] = status;
    b["statusName"] = status == 0   ? "success"
                      : status == 4 ? "cancelled"
                                    : "failed";
  }
  return {{"event", kind},
          {"build", b},
          {"eval",
           {{"id", 12},
            {"inputsHash", "git:" + std::string(40, 'b')},
            {"revision", std::string(40, 'b')}}}};
}

// Per-job statuses: only with `jobs` set and for the jobs it names; the
// commit is the build's evaluation's; each forge's states.
TEST(ForgeApi, PerJobStatusesForTheJobsNamed) {
  std::string sha(40, 'b');
  StatusSettings s{"", "http://kiln", "tok", parseJobGlobs("tests.*,hello")};
  auto done = statusRequest(
      Api::kGithub, buildEvent("build.finished", "github", "tests.unit", 0), s);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->path, "/repos/group/pkgs/statuses/" + sha);
  EXPECT_EQ(done->body["state"], "success");
  EXPECT_EQ(done->body["context"], "kiln/ci:pr-7/tests.unit");
  EXPECT_EQ(done->body["description"], "success");
  EXPECT_EQ(done->body["target_url"], "http://kiln/build/41");
  // A result reused from an earlier build is posted on this commit too.
  json reused = buildEvent("build.finished", "github", "hello", 0);
  reused["build"]["reusedFrom"] = 12;
  auto again = statusRequest(Api::kGithub, reused, s);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->body["description"], "success (reused from build 12)");
  auto started = statusRequest(
      Api::kGithub, buildEvent("build.started", "github", "hello", 0), s);
  ASSERT_TRUE(started);
  EXPECT_EQ(started->body["state"], "pending");
  EXPECT_EQ(started->body["description"], "building");
  // Jobs not named, and every job without the setting: no request.
  EXPECT_FALSE(statusRequest(
      Api::kGithub, buildEvent("build.finished", "github", "docs", 0), s));
  EXPECT_FALSE(statusRequest(Api::kGithub,
                             buildEvent("build.finished", "github", "hello", 0),
                             {"", "", "tok", {}}));
  // A build of another forge's jobset, or without a git commit.
  EXPECT_FALSE(statusRequest(
      Api::kGitea, buildEvent("build.finished", "github", "hello", 0), s));
  json pathInputs = buildEvent("build.finished", "github", "hello", 0);
  pathInputs["eval"] = {{"id", 12}, {"inputsHash", "sha256:abc"}};
  EXPECT_FALSE(statusRequest(Api::kGithub, pathInputs, s));

  // GitLab's path and name; each forge's words for kiln's states.
  s.basePath = "/api/v4";
  auto gl = statusRequest(
      Api::kGitlab, buildEvent("build.finished", "gitlab", "hello", 1), s);
  ASSERT_TRUE(gl);
  EXPECT_EQ(gl->path, "/api/v4/projects/group%2Fpkgs/statuses/" + sha);
  EXPECT_EQ(gl->body["name"], "kiln/ci:pr-7/hello");
  struct Case {
    Api api;
    const char *forge, *kind;
    int status;
    const char* state;
  };
  for (const Case& c :
       {Case{Api::kGitlab, "gitlab", "build.finished", 1, "failed"},
        {Api::kGitlab, "gitlab", "build.started", 0, "running"},
        {Api::kGitlab, "gitlab", "build.finished", 4, "canceled"},
        {Api::kGitea, "gitea", "build.finished", 4, "error"},
        {Api::kGitea, "gitea", "build.started", 0, "pending"},
        {Api::kGithub, "github", "build.finished", 2, "failure"}}) {
    auto r =
        statusRequest(c.api, buildEvent(c.kind, c.forge, "hello", c.status), s);
    ASSERT_TRUE(r) << c.forge << " " << c.kind;
    EXPECT_EQ(r->body["state"], c.state) << c.forge << " " << c.kind;
  }
}

TEST(ForgeApi, JobGlobsAreBounded) {
  EXPECT_EQ(parseJobGlobs("*"), std::vector<std::string>{"*"});
  EXPECT_EQ(parseJobGlobs("a,b*").size(), 2u);
  EXPECT_THROW(parseJobGlobs(""), std::invalid_argument);
  EXPECT_THROW(parseJobGlobs("a,,b"), std::invalid_argument);
  EXPECT_THROW(parseJobGlobs(std::string(257, 'a')), std::invalid_argument);
  std::string many = "a";
  for (int i = 0; i < 64; ++i) many += ",a";
  EXPECT_THROW(parseJobGlobs(many), std::invalid_argument);
}

TEST(ForgeApi, RateLimitAnswers) {
  EXPECT_EQ(rateLimitedUntil(429, {{"retry-after", "30"}}, 1000), 1030);
  EXPECT_EQ(
      rateLimitedUntil(
          403, {{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1500"}},
          1000),
      1500);
  EXPECT_EQ(rateLimitedUntil(429, {{"retry-after", "999999"}}, 0), 3600);
  EXPECT_EQ(rateLimitedUntil(429, {}, 1000), 1060);
  // A 403 that is not a rate limit (a refused token), and other answers.
  EXPECT_FALSE(rateLimitedUntil(403, {}, 1000));
  EXPECT_FALSE(rateLimitedUntil(500, {{"retry-after", "5"}}, 1000));
  EXPECT_FALSE(rateLimitedUntil(201, {}, 1000));
}

}  // namespace
}  // namespace kiln::plugin::forge
