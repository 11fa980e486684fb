// `kiln scheduler` as a process, driven by the operator commands: projects
// and jobsets, an evaluation through `kiln eval` writing into the central
// store (and through the nix-instantiate adapter, chosen by the jobset;
// per-job errors kept; both give identical jobs), `kiln queue` through the
// requests table, and the commands on a stopped scheduler.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln_process.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// A `kiln scheduler` child process (plain text, ephemeral ports), writing
// to `outFile`.
test::KilnProcess startScheduler(const std::string& stateDir,
                                 const std::string& outFile) {
  return test::KilnProcess(
      {"scheduler", "--state-dir", stateDir, "--listen", "tcp://127.0.0.1:*",
       "--insecure-plaintext", "--metrics-port", "0"},
      outFile);
}

test::RunResult kiln(const std::string& state, std::vector<std::string> args) {
  args.insert(args.begin(), test::kilnBinary());
  args.push_back("--state-dir");
  args.push_back(state);
  return test::run(args);
}

class SchedulerCli : public ::testing::TestWithParam<std::string> {};

// A collection with a source file, two systems, an argument and a broken
// job, in `dir`/coll; returns the folder.
std::string writeDemoCollection(const std::string& dir) {
  std::string coll = dir + "/coll";
  createDirs(coll);
  writeFile(coll + "/build.sh", "echo hi > $out\n");
  writeFile(coll + "/default.nix", R"({ greeting ? "hi" }: {
  a = derivation { name = "a"; system = "x86_64-linux"; builder = "/bin/sh";
                   args = [ ./build.sh ]; inherit greeting; };
  b = derivation { name = "b"; system = "aarch64-linux"; builder = "/bin/sh";
                   args = [ "-c" "echo > $out" ]; };
  broken = throw "this job is broken";
})");
  return coll;
}

// Creates jobset `name` of project demo on `coll` with `evaluator`.
test::RunResult createDemoJobset(const std::string& state,
                                 const std::string& name,
                                 const std::string& coll,
                                 const std::string& evaluator) {
  return kiln(
      state, {"jobset", "create", "--project", "demo", name, "--location", coll,
              "--check-interval", "0", "--evaluator", evaluator, "--arguments",
              R"({"greeting": "\"hello\""})"});
}

// "job drvPath" lines of evaluation `eval`'s builds, by job.
std::string jobsOfEval(const std::string& state, int64_t eval) {
  auto r = test::run({"python3", "-c",
                      "import sqlite3, sys\n"
                      "for j, d in sqlite3.connect(sys.argv[1]).execute("
                      "'select job, drv_path from builds where eval = ? "
                      "order by job', (int(sys.argv[2]),)): print(j, d)",
                      state + "/scheduler.sqlite", std::to_string(eval)});
  if (r.exitCode != 0) throw Error("reading builds failed: " + r.err);
  return r.out;
}

TEST_P(SchedulerCli, EvaluatesAJobsetAndExplainsTheQueue) {
  if (GetParam() == "nix" && !test::haveProgram("nix-instantiate"))
    GTEST_SKIP() << "no Nix";
  TempDir dir;
  std::string state = dir.path() + "/state";
  std::string coll = writeDemoCollection(dir.path());
  // Created before the scheduler starts: applied directly.
  auto r = kiln(state, {"project", "create", "demo"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  r = createDemoJobset(state, "main", coll, GetParam());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  r = kiln(state, {"jobset", "eval", "--project", "demo", "main"});
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.err, HasSubstr("no scheduler is running"));

  std::string out = dir.path() + "/sched.out";
  test::KilnProcess sched = startScheduler(state, out);
  ASSERT_TRUE(sched.waitForLog("listening", 30s)) << sched.log();
  r = kiln(state, {"jobset", "eval", "--project", "demo", "main", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"eval\":1"));
  EXPECT_THAT(test::evalErrors(state), HasSubstr("broken: "));
  EXPECT_THAT(test::evalErrors(state), HasSubstr("this job is broken"));
  r = kiln(state, {"queue", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto q = nlohmann::json::parse(r.out);
  ASSERT_EQ(q.size(), 2u) << r.out;
  for (auto& e : q) {
    EXPECT_THAT(e["reason"].get<std::string>(), HasSubstr("no worker"));
    auto drv = e["drvPath"].get<std::string>();
    EXPECT_TRUE(pathExists(state + "/store/" + baseNameOf(drv))) << drv;
    if (drv.ends_with("-a.drv")) {  // registered with its source as reference
      auto refs = kiln(state, {"store", "query", "--references", drv});
      EXPECT_THAT(refs.out, HasSubstr("-build.sh")) << refs.err;
    }
  }
  r = kiln(state, {"build-bump", "1", "--priority", "5"});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  r = kiln(state, {"build-cancel", "99"});
  EXPECT_EQ(r.exitCode, 4) << r.err;
  EXPECT_THAT(r.err, HasSubstr("no build with id 99"));
  EXPECT_EQ(sched.stop(), 0);

  // Stopped: the queue is read from the database.
  r = kiln(state, {"queue"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("the scheduler is not running"));
  r = kiln(state, {"cached-failure", "clear", "--json"});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"cleared\":0"));
}

// --notify, --notify-secret-file and --notify-ca-file are checked before
// anything starts.
TEST(SchedulerCliNotify, RefusesMalformedNotifiersWithTheReason) {
  TempDir dir;
  std::string secret = dir.path() + "/secret";
  writeFile(secret, "k\n");
  auto sched = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{
        test::kilnBinary(),    "scheduler", "--state-dir",
        dir.path() + "/state", "--listen",  "tcp://127.0.0.1:*",
        "--insecure-plaintext"};
    args.insert(args.end(), extra.begin(), extra.end());
    return test::run(args);
  };
  auto r = sched({"--notify", "hook"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("expected KIND:ARGUMENT"));
  r = sched({"--notify", "webhook:ftp://example.org/"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("a webhook URL is http(s)://HOST"));
  r = sched({"--notify", "webhook:http://127.0.0.1:1/", "--notify-ca-file",
             secret});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("--notify-ca-file is for https webhooks"));
  r = sched({"--notify", "webhook:https://127.0.0.1:1/", "--notify-ca-file",
             dir.path() + "/missing"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("missing: not a readable file"));
  r = sched({"--notify", "command:true", "--notify-secret-file", secret});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("no --notify webhook:URL"));
  r = sched({"--notify", "webhook:http://127.0.0.1:1/", "--notify-secret-file",
             dir.path() + "/missing"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("not a readable file"));
  r = sched({"--notify", "pager:x"});
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.err, HasSubstr("pager"));
}

INSTANTIATE_TEST_SUITE_P(Evaluators, SchedulerCli,
                         ::testing::Values("builtin", "nix"),
                         [](const auto& info) {
                           return info.param == "builtin" ? "KilnEval"
                                                          : "NixInstantiate";
                         });

// Each jobset chooses its evaluator: one collection evaluated by kiln's own
// and by nix-instantiate (both evaluator plugins) gives the same jobs, .drv
// paths included, and the same per-job errors; an unknown evaluator is
// refused.
TEST(SchedulerCliEvaluators, BuiltinAndNixGiveIdenticalJobs) {
  if (!test::haveProgram("nix-instantiate")) GTEST_SKIP() << "no Nix";
  TempDir dir;
  std::string state = dir.path() + "/state";
  std::string coll = writeDemoCollection(dir.path());
  ASSERT_EQ(kiln(state, {"project", "create", "demo"}).exitCode, 0);
  auto r = createDemoJobset(state, "bad", coll, "guile");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.err, HasSubstr("no evaluator plugin named 'guile' (loaded "
                               "evaluator plugins: builtin, nix;"));
  ASSERT_EQ(createDemoJobset(state, "ours", coll, "builtin").exitCode, 0);
  ASSERT_EQ(createDemoJobset(state, "nix", coll, "nix").exitCode, 0);
  test::KilnProcess sched = startScheduler(state, dir.path() + "/sched.out");
  ASSERT_TRUE(sched.waitForLog("listening", 30s)) << sched.log();
  std::map<std::string, int64_t> evals;
  for (std::string js : {"ours", "nix"}) {
    r = kiln(state, {"jobset", "eval", "--project", "demo", js, "--json"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    evals[js] = nlohmann::json::parse(r.out)["eval"].get<int64_t>();
  }
  EXPECT_EQ(sched.stop(), 0);
  std::string ours = jobsOfEval(state, evals["ours"]);
  EXPECT_THAT(ours, HasSubstr("a /nix/store/"));
  EXPECT_THAT(ours, HasSubstr("b /nix/store/"));
  EXPECT_EQ(ours, jobsOfEval(state, evals["nix"]));
  EXPECT_THAT(test::evalErrors(state), HasSubstr("broken: "));
}

// The evaluator is any loaded evaluator plugin: a jobset made with the
// test plugins on the plugin path names `test-evaluator`; the scheduler,
// started without them, refuses that name for a new jobset (listing what it
// loaded) and fails the old jobset's evaluation the same way, through its
// evaluation thread and the database, and goes on evaluating others.
TEST(SchedulerCliEvaluators, AnEvaluatorThatIsNotLoadedFailsItsEvaluation) {
  TempDir dir;
  std::string state = dir.path() + "/state";
  std::string coll = writeDemoCollection(dir.path());
  ASSERT_EQ(kiln(state, {"project", "create", "demo"}).exitCode, 0);
  std::string testPlugins =
      "KILN_PLUGIN_PATH=" + test::binaryDir() + "/tests/plugins/good";
  auto r = test::run({test::kilnBinary(), "jobset", "create", "--project",
                      "demo", "gone", "--location", coll, "--check-interval",
                      "0", "--evaluator", "test-evaluator", "--state-dir",
                      state},
                     "", {testPlugins});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  test::KilnProcess sched = startScheduler(state, dir.path() + "/sched.out");
  ASSERT_TRUE(sched.waitForLog("listening", 30s)) << sched.log();
  const std::string loaded =
      "no evaluator plugin named 'test-evaluator' (loaded evaluator "
      "plugins: builtin, nix;";
  r = createDemoJobset(state, "new", coll, "test-evaluator");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.err, HasSubstr("jobset 'new': " + loaded)) << r.err;
  r = kiln(state, {"jobset", "eval", "--project", "demo", "gone", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  int64_t eval = nlohmann::json::parse(r.out)["eval"].get<int64_t>();
  auto q = test::run({"python3", "-c",
                      "import sqlite3, sys\n"
                      "print(sqlite3.connect(sys.argv[1]).execute("
                      "'select error from evaluations where id = ?', "
                      "(int(sys.argv[2]),)).fetchone()[0])",
                      state + "/scheduler.sqlite", std::to_string(eval)});
  ASSERT_EQ(q.exitCode, 0) << q.err;
  EXPECT_THAT(q.out, HasSubstr("jobset 'gone': " + loaded)) << q.out;
  EXPECT_EQ(jobsOfEval(state, eval), "");
  // Still serving: a jobset with a loaded evaluator evaluates.
  ASSERT_EQ(createDemoJobset(state, "ours", coll, "builtin").exitCode, 0);
  r = kiln(state, {"jobset", "eval", "--project", "demo", "ours", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  eval = nlohmann::json::parse(r.out)["eval"].get<int64_t>();
  EXPECT_THAT(jobsOfEval(state, eval), HasSubstr("a /nix/store/"));
  EXPECT_EQ(sched.stop(), 0);
}

}  // namespace
}  // namespace kiln
