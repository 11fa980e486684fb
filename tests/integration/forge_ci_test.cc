// Continuous integration through a forge, per forge (issue 35, docs/ci.md):
// `kiln serve` follows the branch `main` of a repository served by a real
// `git daemon` on loopback; the forge's API is played by a recording HTTP
// server. A signed pull-request webhook makes a jobset for it, evaluated
// at its head; a second push cancels the first head's unfinished builds;
// the status notifier posts pending then success for the head commit,
// with the counts and what it rebuilds against the base, and (configured
// for job b) b's own statuses, each request in the forge's documented
// shape; a bad signature gets 401 and creates nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/utsname.h>

#include <nlohmann/json.hpp>

#include "farm.h"
#include "http_recorder.h"
#include "kiln/common/file.h"
#include "kiln/common/process.h"
#include "kiln/scheduler/state_db.h"
#include "test_support.h"

namespace kiln {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

const char* kSecret = "forge-webhook-secret";

// base <- a <- b. a's script is in a.nix (a pull request changes it).
const char* kPackages = R"(
let
  mk = name: script: derivation {
    inherit name;
    system = builtins.currentSystem;
    PATH = "/usr/bin:/bin";
    builder = "/bin/sh";
    args = [ "-c" script ];
  };
in rec {
  base = mk "base" "echo base > $out";
  a = mk "a" "cat ${base} > $out; ${import ./a.nix}";
  b = mk "b" "cat ${a} > $out";
}
)";

// Commits a.nix with `script` and pushes it to `ref` of the served
// repository; returns the commit.
std::string pushA(const std::string& work, const std::string& script,
                  const std::string& ref) {
  writeFile(work + "/a.nix", "\"" + script + "\"\n");
  test::git(work, {"add", "-A"});
  test::git(work, {"commit", "-q", "-m", script});
  test::git(work, {"push", "-q", "origin", "HEAD:" + ref});
  return test::git(work, {"rev-parse", "HEAD"});
}

struct ForgeCase {
  std::string name;     // github, gitea, gitlab
  std::string repo;     // the forge's name of the repository
  std::string pullRef;  // where the head is pushed
  std::string statusPath;
};

// The forge's pull request webhook: headers and body.
std::pair<std::map<std::string, std::string>, std::string> pullHook(
    const ForgeCase& f, const std::string& url, const std::string& action,
    const std::string& sha, const std::string& delivery,
    const std::string& secret) {
  json body;
  std::map<std::string, std::string> h{{"Content-Type", "application/json"}};
  if (f.name == "gitlab") {
    json attrs{{"iid", 7},
               {"action", action == "opened"   ? "open"
                          : action == "closed" ? "close"
                                               : "update"},
               {"title", "change a"},
               {"source_branch", "change-a"},
               {"target_branch", "main"},
               {"last_commit", {{"id", sha}}},
               {"source", {{"git_http_url", url}}},
               {"target", {{"git_http_url", url}}}};
    if (action != "opened") attrs["oldrev"] = std::string(40, '1');
    body = {
        {"object_kind", "merge_request"},
        {"project", {{"path_with_namespace", f.repo}, {"git_http_url", url}}},
        {"object_attributes", attrs}};
    h["X-Gitlab-Event"] = "Merge Request Hook";
    h["X-Gitlab-Event-UUID"] = delivery;
    h["X-Gitlab-Token"] = secret;
    return {h, body.dump()};
  }
  json repo{{"full_name", f.repo}, {"clone_url", url}};
  body = {{"action", action},
          {"number", 7},
          {"pull_request",
           {{"number", 7},
            {"title", "change a"},
            {"head", {{"ref", "change-a"}, {"sha", sha}, {"repo", repo}}},
            {"base", {{"ref", "main"}, {"repo", repo}}}}},
          {"repository", repo}};
  std::string text = body.dump();
  if (f.name == "github") {
    h["X-GitHub-Event"] = "pull_request";
    h["X-GitHub-Delivery"] = delivery;
    h["X-Hub-Signature-256"] = "sha256=" + test::hmacSha256Hex(secret, text);
  } else {
    h["X-Gitea-Event"] = "pull_request";
    h["X-Gitea-Delivery"] = delivery;
    h["X-Gitea-Signature"] = test::hmacSha256Hex(secret, text);
  }
  return {h, text};
}

// builtins.currentSystem here, e.g. x86_64-linux.
std::string hostSystem() {
  utsname u{};
  uname(&u);
  return std::string(u.machine) + "-linux";
}

// The forge's push webhook for `sha` on branch main.
std::pair<std::map<std::string, std::string>, std::string> pushHook(
    const ForgeCase& f, const std::string& url, const std::string& sha,
    const std::string& delivery) {
  std::map<std::string, std::string> h{{"Content-Type", "application/json"}};
  json body{{"ref", "refs/heads/main"}, {"after", sha}};
  if (f.name == "gitlab") {
    body["object_kind"] = "push";
    body["project"] = {{"path_with_namespace", f.repo}, {"git_http_url", url}};
    h["X-Gitlab-Event"] = "Push Hook";
    h["X-Gitlab-Event-UUID"] = delivery;
    h["X-Gitlab-Token"] = kSecret;
    return {h, body.dump()};
  }
  body["repository"] = {{"full_name", f.repo}, {"clone_url", url}};
  std::string text = body.dump();
  std::string p = f.name == "github" ? "X-GitHub-" : "X-Gitea-";
  h[p + "Event"] = "push";
  h[p + "Delivery"] = delivery;
  if (f.name == "github")
    h["X-Hub-Signature-256"] = "sha256=" + test::hmacSha256Hex(kSecret, text);
  else
    h["X-Gitea-Signature"] = test::hmacSha256Hex(kSecret, text);
  return {h, text};
}

// A query's single integer answer on the farm's state.
// -1 while the scheduler has not made its database.
int64_t count(const std::string& state, const std::string& sql) {
  try {
    scheduler::StateDb db(state + "/scheduler.sqlite",
                          scheduler::StateDb::ReadOnly{});
    auto s = db.db().prepare(sql);
    return s.step() ? s.getInt(0) : -1;
  } catch (const Error&) {
    return -1;
  }
}

// A repository served by `git daemon`, the forge's API played by a
// recorder, and `kiln serve` following the branch main, built once.
class ForgeCiTest : public ::testing::TestWithParam<ForgeCase> {
 protected:
  void SetUp() override {
    std::string why;
    if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
    if (!test::haveProgram("git")) GTEST_SKIP() << "no git";
    startGitServer();
    startFarm();
  }
  // The bare repository under srv_, served on loopback; work_ pushes to it.
  void startGitServer() {
    createDirs(srv_);
    test::run({"git", "init", "-q", "--bare", srv_ + "/pkgs.git"});
    int gitPort = test::freeLoopbackPort();
    ProcessSpec daemon;
    daemon.program = "git";
    daemon.searchPath = true;
    daemon.args = {"git",
                   "daemon",
                   "--reuseaddr",
                   "--export-all",
                   "--listen=127.0.0.1",
                   "--port=" + std::to_string(gitPort),
                   "--base-path=" + srv_,
                   srv_};
    daemon.env = currentEnvironment();
    daemon.outputFile = dir_.path() + "/git-daemon.log";
    gitDaemon_ = std::make_unique<Process>(daemon);
    url_ = "git://127.0.0.1:" + std::to_string(gitPort) + "/pkgs.git";
    createDirs(work_);
    test::git(work_, {"init", "-q", "-b", "main"});
    test::git(work_, {"remote", "add", "origin", srv_ + "/pkgs.git"});
    writeFile(work_ + "/default.nix", kPackages);
    pushA(work_, "echo v1 >> $out", "main");
  }
  // `kiln serve` with the forge's status notifier; waits for main's 3
  // builds.
  void startFarm() {
    const ForgeCase& f = GetParam();
    writeFile(dir_.path() + "/token", "forge-token\n");
    writeFile(dir_.path() + "/secret", std::string(kSecret) + "\n");
    int port = test::freeLoopbackPort();
    web_ = test::freeLoopbackPort();
    std::string apiUrl = "http://127.0.0.1:" + std::to_string(api_.port()) +
                         (f.name == "github" ? "" : "/api/v1");
    writeFile(
        dir_.path() + "/kiln.toml",
        "state_dir = \"state\"\n[scheduler]\nlisten = \"tcp://127.0.0.1:" +
            std::to_string(port) +
            "\"\nweb_listen = \"127.0.0.1:" + std::to_string(web_) +
            "\"\nmetrics_port = -1\npull_close_grace = 1\nnotify = [\"" +
            f.name + "-status:" + apiUrl + ";token-file=" + dir_.path() +
            "/token;link=http://kiln.example;jobs=b\"]\n[local_workers]\n"
            "count = 1\nslots = 1\nsandbox = \"none\"\n[[project]]\n"
            "name = \"ci\"\nwebhook_secret_file = \"secret\"\n"
            "[[project.jobset]]\nname = \"main\"\ngit = \"" +
            url_ + "\"\nbranch = \"main\"\ncheck_interval = 0\n");
    serve_ = std::make_unique<test::KilnProcess>(
        std::vector<std::string>{"serve", "--config",
                                 dir_.path() + "/kiln.toml"},
        dir_.path() + "/serve.log");
    ASSERT_TRUE(test::pollUntil(
        [&] {
          return count(state_,
                       "SELECT COUNT(*) FROM builds WHERE finished = 1 "
                       "AND status = 0") == 3;
        },
        180s))
        << serve_->log();
  }

  TempDir dir_;
  std::string srv_ = dir_.path() + "/srv", work_ = dir_.path() + "/work",
              state_ = dir_.path() + "/state", url_;
  std::unique_ptr<Process> gitDaemon_;
  test::HttpRecorder api_;
  int web_ = 0;
  std::unique_ptr<test::KilnProcess> serve_;
};

void PrintTo(const ForgeCase& f, std::ostream* os) { *os << f.name; }

// Job b's own statuses (`jobs=b`): on the second head, running when its
// build started, then its result, linking to that build; on the first
// head, whose builds were cancelled, its cancellation. No other job gets
// one.
void expectJobStatuses(const ForgeCase& f, test::HttpRecorder& api,
                       const std::string& state, const std::string& sha1,
                       const std::string& sha2) {
  std::string key = f.name == "gitlab" ? "name" : "context";
  auto ofB = [&](const std::string& sha) {
    std::vector<std::pair<test::RecordedRequest, json>> out;
    for (auto& r : api.requests()) {
      json body = json::parse(r.body);
      EXPECT_NE(body[key], "kiln/ci:pr-7/a");
      EXPECT_NE(body[key], "kiln/ci:pr-7/base");
      if (r.path.find(sha) != std::string::npos &&
          body[key] == "kiln/ci:pr-7/b")
        out.emplace_back(r, body);
    }
    return out;
  };
  auto b2 = ofB(sha2);
  ASSERT_GE(b2.size(), 2u);
  EXPECT_EQ(b2.front().second["state"],
            f.name == "gitlab" ? "running" : "pending");
  EXPECT_EQ(b2.front().second["description"], "building");
  auto& [req, done] = b2.back();
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.path,
            (f.name == "github" ? "" : "/api/v1") + f.statusPath + sha2);
  EXPECT_EQ(done["state"], "success");
  EXPECT_EQ(done["description"], "success");
  int64_t build = count(state,
                        "SELECT b.id FROM builds b JOIN evaluations e ON "
                        "e.id = b.eval WHERE b.job = 'b' AND e.inputs_hash = "
                        "'git:" +
                            sha2 + "'");
  EXPECT_EQ(done["target_url"],
            "http://kiln.example/build/" + std::to_string(build));
  EXPECT_EQ(
      req.headers.count(f.name == "gitlab" ? "private-token" : "authorization"),
      1u);
  // The first head's b was cancelled before it started.
  ASSERT_TRUE(test::pollUntil([&] { return !ofB(sha1).empty(); }, 30s));
  auto b1 = ofB(sha1).back().second;
  EXPECT_EQ(b1["state"], f.name == "gitlab" ? "canceled" : "error");
  EXPECT_EQ(b1["description"], "cancelled");
}

TEST_P(ForgeCiTest, PullRequestJobsetBuildsStatusesAndCancels) {
  const ForgeCase& f = GetParam();
  const std::string &work = work_, &state = state_, &url = url_;
  int web = web_;
  test::HttpRecorder& api = api_;
  test::KilnProcess& serve = *serve_;
  // A bad signature: 401, nothing created.
  std::string sha1 = pushA(work, "sleep 600; echo v2 >> $out", f.pullRef);
  auto [badHeaders, badBody] =
      pullHook(f, url, "opened", sha1, "bad-1", "not-the-secret");
  auto bad = test::httpPost(web, "/api/webhook/" + f.name, badHeaders, badBody);
  EXPECT_EQ(bad.first, 401) << bad.second;
  const std::string forgeRequests =
      "SELECT COUNT(*) FROM requests WHERE kind = 'forge-event'";
  int64_t requestsBefore = count(state, forgeRequests);

  // Opened: a jobset pr-7 evaluated at its head; a is built (slowly), b
  // waits for it.
  auto [h1, b1] = pullHook(f, url, "opened", sha1, "d-1", kSecret);
  auto open = test::httpPost(web, "/api/webhook/" + f.name, h1, b1);
  ASSERT_EQ(open.first, 202) << open.second;
  EXPECT_EQ(requestsBefore, count(state, forgeRequests) - 1);
  ASSERT_TRUE(test::pollUntil(
      [&] {
        return count(state,
                     "SELECT COUNT(*) FROM builds b JOIN jobsets j ON "
                     "j.id = b.jobset JOIN evaluations e ON e.id = b.eval "
                     "WHERE j.name = 'pr-7' AND b.finished = 0 AND "
                     "e.inputs_hash = 'git:" +
                         sha1 + "'") == 2;
      },
      120s))
      << serve.log();
  // The same delivery again changes nothing.
  auto replay = test::httpPost(web, "/api/webhook/" + f.name, h1, b1);
  EXPECT_EQ(replay.first, 200) << replay.second;

  // A second push: the first head's builds are cancelled (status 4), the
  // new head is built.
  std::string sha2 = pushA(work, "echo v3 >> $out", f.pullRef);
  auto [h2, b2] =
      pullHook(f, url, f.name == "gitea" ? "synchronized" : "synchronize", sha2,
               "d-2", kSecret);
  auto sync = test::httpPost(web, "/api/webhook/" + f.name, h2, b2);
  ASSERT_EQ(sync.first, 202) << sync.second;
  ASSERT_TRUE(test::pollUntil(
      [&] {
        return count(state,
                     "SELECT COUNT(*) FROM builds b JOIN evaluations e ON "
                     "e.id = b.eval WHERE b.status = 4 AND e.inputs_hash = "
                     "'git:" +
                         sha1 + "'") == 2;
      },
      60s))
      << serve.log();

  // Statuses for the second head: pending with the counts and rebuilds,
  // then success, each in the forge's documented shape.
  // The statuses posted for `sha` in `context` (default: the jobset's).
  const char* contextKey = f.name == "gitlab" ? "name" : "context";
  auto statusesOf = [&](const std::string& sha, const std::string& context) {
    std::vector<std::pair<test::RecordedRequest, json>> out;
    for (auto& r : api.requests()) {
      json body = json::parse(r.body);
      if (r.path.find(sha) != std::string::npos &&
          body.value(contextKey, "") == context)
        out.emplace_back(r, body);
    }
    return out;
  };
  std::string success = "success";
  ASSERT_TRUE(test::pollUntil(
      [&] {
        for (auto& [r, body] : statusesOf(sha2, "kiln/ci:pr-7"))
          if (body["state"] == success) return true;
        return false;
      },
      120s))
      << serve.log();
  auto got = statusesOf(sha2, "kiln/ci:pr-7");
  ASSERT_GE(got.size(), 2u);
  auto& [pendingReq, pending] = got.front();
  EXPECT_EQ(pendingReq.method, "POST");
  std::string prefix = f.name == "github" ? "" : "/api/v1";
  EXPECT_EQ(pendingReq.path, prefix + f.statusPath + sha2);
  EXPECT_EQ(pending["state"], "pending");
  EXPECT_EQ(pending["description"],
            "3 jobs, 1 done; 2 rebuilt vs base (" + hostSystem() + " 2)");
  EXPECT_THAT(pending.value("target_url", ""),
              HasSubstr("http://kiln.example/eval/"));
  EXPECT_EQ(pending[f.name == "gitlab" ? "name" : "context"], "kiln/ci:pr-7");
  if (f.name == "github") {
    EXPECT_EQ(pendingReq.headers["authorization"], "Bearer forge-token");
    EXPECT_EQ(pendingReq.headers["accept"], "application/vnd.github+json");
  } else if (f.name == "gitea") {
    EXPECT_EQ(pendingReq.headers["authorization"], "token forge-token");
  } else {
    EXPECT_EQ(pendingReq.headers["private-token"], "forge-token");
  }
  EXPECT_EQ(pendingReq.headers["content-type"], "application/json");
  auto& last = got.back().second;
  EXPECT_EQ(last["state"], "success");
  EXPECT_EQ(last["description"], "3 succeeded, 0 failed of 3 jobs");
  expectJobStatuses(f, api, state, sha1, sha2);

  // A push to main: its jobset is evaluated at once at that commit (its
  // check interval is 0: nothing else would), and gets its statuses.
  // The forge answers the first status with a rate limit: it is sent
  // again after the time named, not lost.
  std::string sha3 = pushA(work, "echo v4 >> $out", "main");
  api.queueAnswer(429, {{"Retry-After", "1"}});
  auto [h3, b3] = pushHook(f, url, sha3, "d-3");
  auto push = test::httpPost(web, "/api/webhook/" + f.name, h3, b3);
  ASSERT_EQ(push.first, 202) << push.second;
  ASSERT_TRUE(test::pollUntil(
      [&] {
        for (auto& [r, body] : statusesOf(sha3, "kiln/ci:main"))
          if (body["state"] == "success") return true;
        return false;
      },
      120s))
      << serve.log();
  EXPECT_EQ(count(state,
                  "SELECT COUNT(*) FROM evaluations e JOIN jobsets j "
                  "ON j.id = e.jobset WHERE j.name = 'main' AND "
                  "e.inputs_hash = 'git:" +
                      sha3 + "'"),
            1);
  auto got3 = statusesOf(sha3, "kiln/ci:main");
  EXPECT_EQ(got3.back().second[f.name == "gitlab" ? "name" : "context"],
            "kiln/ci:main");
  ASSERT_GE(got3.size(), 3u);  // pending (rate-limited), pending, success
  EXPECT_EQ(got3[0].second, got3[1].second);
  EXPECT_EQ(got3[0].second["state"], "pending");

  // A slow head, then the pull request closes: its jobset is disabled at
  // once and, after the grace period (1 s here), its builds cancelled.
  std::string sha4 = pushA(work, "sleep 600; echo v5 >> $out", f.pullRef);
  auto [h4, b4] =
      pullHook(f, url, f.name == "gitea" ? "synchronized" : "synchronize", sha4,
               "d-4", kSecret);
  ASSERT_EQ(test::httpPost(web, "/api/webhook/" + f.name, h4, b4).first, 202);
  std::string unfinished4 =
      "SELECT COUNT(*) FROM builds b JOIN evaluations e ON e.id = b.eval "
      "WHERE b.finished = 0 AND e.inputs_hash = 'git:" +
      sha4 + "'";
  ASSERT_TRUE(
      test::pollUntil([&] { return count(state, unfinished4) == 2; }, 120s))
      << serve.log();
  auto [h5, b5] = pullHook(f, url, "closed", sha4, "d-5", kSecret);
  ASSERT_EQ(test::httpPost(web, "/api/webhook/" + f.name, h5, b5).first, 202);
  ASSERT_TRUE(
      test::pollUntil([&] { return count(state, unfinished4) == 0; }, 60s))
      << serve.log();
  EXPECT_EQ(count(state, "SELECT enabled FROM jobsets WHERE name = 'pr-7'"), 0);
  EXPECT_EQ(count(state,
                  "SELECT COUNT(*) FROM builds b JOIN evaluations e ON "
                  "e.id = b.eval WHERE b.status = 4 AND e.inputs_hash = 'git:" +
                      sha4 + "'"),
            2);
  EXPECT_EQ(serve.stop(), 0) << serve.log();
}

INSTANTIATE_TEST_SUITE_P(
    Forges, ForgeCiTest,
    ::testing::Values(ForgeCase{"github", "octo/pkgs", "refs/pull/7/head",
                                "/repos/octo/pkgs/statuses/"},
                      ForgeCase{"gitea", "me/pkgs", "refs/pull/7/head",
                                "/repos/me/pkgs/statuses/"},
                      ForgeCase{"gitlab", "group/pkgs",
                                "refs/merge-requests/7/head",
                                "/projects/group%2Fpkgs/statuses/"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace kiln
