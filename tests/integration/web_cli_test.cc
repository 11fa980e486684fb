// `kiln scheduler --web-listen`: the scheduler process serves the web front
// end on the given address, prints its URL, answers unknown pages with a
// clear 404 and /metrics in a text promtool accepts (plugins' counters
// included, labelled with the plugin), lists workers on the first
// /api/workers read after they were welcomed, and refuses a malformed address
// before starting.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln_process.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

TEST(WebCli, SchedulerServesTheWebFrontEnd) {
  TempDir dir;
  int port = test::freeLoopbackPort();
  std::string url = "http://127.0.0.1:" + std::to_string(port);
  test::KilnProcess sched(
      {"scheduler", "--state-dir", dir.path() + "/state", "--listen",
       "tcp://127.0.0.1:*", "--insecure-plaintext", "--web-listen",
       "127.0.0.1:" + std::to_string(port)},
      dir.path() + "/sched.log");
  // Not "listening": the service logs that before the web is up.
  ASSERT_TRUE(sched.waitForLog(" web " + url, 30s)) << sched.log();
  try {
    test::httpGet(port, "/no/such/page");
    ADD_FAILURE() << "a page that does not exist answered 200";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("404 Not Found"));
  }
  // /metrics: the farm's families and the request just answered, in a
  // text promtool accepts.
  std::string metrics = test::httpGet(port, "/metrics");
  EXPECT_THAT(metrics, HasSubstr("kiln_workers 0"));
  EXPECT_THAT(metrics, HasSubstr("route=\"unmatched\",status=\"404\"} 1"));
  if (test::haveProgram("promtool")) {
    auto check = test::run({"promtool", "check", "metrics"}, metrics);
    EXPECT_EQ(check.exitCode, 0) << check.out << check.err;
  }
  EXPECT_EQ(sched.stop(30s), 0) << sched.log();
}

// The workers page reads the scheduler's published snapshot: the very
// first /api/workers after workers were welcomed lists them (the snapshot
// is published before a Welcome goes out, not when a reader asks).
TEST(WebCli, TheFirstWorkersReadListsTheWorkersThatJoined) {
  std::string why;
  if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
  int port = test::freeLoopbackPort();
  test::FarmOptions o;
  o.schedulerArgs = {"--web-listen", "127.0.0.1:" + std::to_string(port)};
  test::Farm farm(o);
  farm.startScheduler();
  for (size_t i = 0; i < 2; ++i) {
    farm.addWorker(test::WorkerOptions::withSlots(1));
    ASSERT_TRUE(farm.worker(i).waitForLog("welcomed by scheduler", 60s))
        << farm.worker(i).log();
  }
  auto workers = nlohmann::json::parse(test::httpGet(port, "/api/workers"));
  std::vector<std::string> names;
  for (auto& w : workers["workers"]) names.push_back(w["name"]);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{farm.workerName(0),
                                             farm.workerName(1)}))
      << workers.dump();
}

// A plugin's counter (the builtin evaluator's jobs_total, added through
// the host's metric_add) reaches /metrics labelled with the plugin, and the
// whole text still passes promtool.
TEST(WebCli, PluginCountersAreOnMetrics) {
  TempDir dir;
  std::string state = dir.path() + "/state", coll = dir.path() + "/coll";
  createDirs(coll);
  writeFile(coll + "/default.nix", R"({
  a = derivation { name = "a"; system = "x86_64-linux"; builder = "/bin/sh";
                   args = [ "-c" "echo > $out" ]; };
  b = derivation { name = "b"; system = "x86_64-linux"; builder = "/bin/sh";
                   args = [ "-c" "echo b > $out" ]; };
})");
  auto kiln = [&](std::vector<std::string> args) {
    args.insert(args.begin(), test::kilnBinary());
    args.insert(args.end(), {"--state-dir", state});
    return test::run(args);
  };
  ASSERT_EQ(kiln({"project", "create", "demo"}).exitCode, 0);
  ASSERT_EQ(kiln({"jobset", "create", "--project", "demo", "main", "--location",
                  coll, "--check-interval", "0"})
                .exitCode,
            0);
  int port = test::freeLoopbackPort();
  test::KilnProcess sched({"scheduler", "--state-dir", state, "--listen",
                           "tcp://127.0.0.1:*", "--insecure-plaintext",
                           "--web-listen", "127.0.0.1:" + std::to_string(port)},
                          dir.path() + "/sched.log");
  ASSERT_TRUE(sched.waitForLog("listening", 30s)) << sched.log();
  auto r = kiln({"jobset", "eval", "--project", "demo", "main"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::string metrics = test::httpGet(port, "/metrics");
  EXPECT_THAT(metrics, HasSubstr("# TYPE kiln_plugin_jobs_total counter"));
  EXPECT_THAT(metrics, HasSubstr("kiln_plugin_jobs_total{kind=\"evaluator\","
                                 "plugin=\"builtin\"} 2"));
  if (test::haveProgram("promtool")) {
    auto check = test::run({"promtool", "check", "metrics"}, metrics);
    EXPECT_EQ(check.exitCode, 0) << check.out << check.err;
  }
  EXPECT_EQ(sched.stop(30s), 0) << sched.log();
}

// The HTTP status of `method url` with an optional bearer token (curl).
int httpStatus(const std::string& method, const std::string& url,
               const std::string& token = "") {
  std::vector<std::string> argv = {
      "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", method, url};
  if (!token.empty()) {
    argv.push_back("-H");
    argv.push_back("Authorization: Bearer " + token);
  }
  auto r = test::run(argv);
  return r.exitCode == 0 ? std::stoi(r.out) : -1;
}

// `kiln token create|list|revoke` against a running scheduler (through its
// requests table), and the web checking those tokens on a mutation.
TEST(WebCli, TokensMadeByTheCliGuardTheWriteApi) {
  if (!test::haveProgram("curl")) GTEST_SKIP() << "curl is not installed";
  TempDir dir;
  std::string state = dir.path() + "/state";
  int port = test::freeLoopbackPort();
  std::string url = "http://127.0.0.1:" + std::to_string(port);
  test::KilnProcess sched({"scheduler", "--state-dir", state, "--listen",
                           "tcp://127.0.0.1:*", "--insecure-plaintext",
                           "--web-listen", "127.0.0.1:" + std::to_string(port)},
                          dir.path() + "/sched.log");
  ASSERT_TRUE(sched.waitForLog("listening", 30s)) << sched.log();
  auto kiln = [&](std::vector<std::string> args) {
    args.insert(args.begin(), test::kilnBinary());
    args.insert(args.end(), {"--state-dir", state});
    return test::run(args);
  };
  ASSERT_EQ(kiln({"project", "create", "p"}).exitCode, 0);
  ASSERT_EQ(kiln({"jobset", "create", "--project", "p", "j", "--location",
                  dir.path() + "/src", "--check-interval", "0"})
                .exitCode,
            0);
  auto op = kiln({"token", "create", "--scope", "operate", "--name", "ci"});
  auto rd = kiln({"token", "create", "--scope", "read"});
  ASSERT_EQ(op.exitCode, 0) << op.err;
  ASSERT_EQ(rd.exitCode, 0) << rd.err;
  std::string opToken = op.out.substr(0, op.out.find('\n'));
  std::string rdToken = rd.out.substr(0, rd.out.find('\n'));
  std::string eval = url + "/api/jobset/p/j/eval";
  EXPECT_EQ(httpStatus("POST", eval), 401);
  EXPECT_EQ(httpStatus("POST", eval, rdToken), 403);
  EXPECT_EQ(httpStatus("POST", eval, opToken), 202);
  auto list = kiln({"token", "list"});
  EXPECT_THAT(list.out, HasSubstr("operate"));
  EXPECT_THAT(list.out, HasSubstr("ci"));
  EXPECT_EQ(list.out.find(opToken), std::string::npos);  // no secrets
  ASSERT_EQ(kiln({"token", "revoke", "1"}).exitCode, 0);
  EXPECT_EQ(httpStatus("POST", eval, opToken), 403);
  EXPECT_EQ(kiln({"token", "revoke", "99"}).exitCode, 4);
  EXPECT_EQ(sched.stop(30s), 0) << sched.log();
}

TEST(WebCli, MalformedWebAddressIsRefused) {
  TempDir dir;
  auto r = test::run({test::kilnBinary(), "scheduler", "--state-dir",
                      dir.path() + "/state", "--listen", "tcp://127.0.0.1:*",
                      "--insecure-plaintext", "--web-listen", "nowhere"});
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.err, HasSubstr("web address 'nowhere' must be HOST:PORT"));
}

}  // namespace
}  // namespace kiln
