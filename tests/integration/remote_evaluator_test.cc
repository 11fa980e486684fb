// Evaluations on hosts of their own (issue 31): `kiln evaluator` claims a
// jobset in the farm's PostgreSQL state, evaluates it into its own store
// and publishes the jobs with their .drv closures; `kiln scheduler
// --evaluations remote` checks, imports and records them and the worker
// builds. A claim whose evaluator stopped renewing it passes to another
// evaluator once its lease ends; a result that is not what it claims is
// recorded as a failed evaluation and nothing of it is stored. The
// evaluated sources travel along, so the channel serves nixexprs.tar.xz.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln_process.h"
#include "postgres_server.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class RemoteEvaluator : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_UNLESS_POSTGRES();
    pg_ = std::make_unique<test::PostgresServer>();
    setenv("PGPASSFILE", pg_->passFile().c_str(), 1);
    url_ = pg_->createDatabase("farm");
    coll_ = dir_.path() + "/coll";
    createDirs(coll_);
    writeFile(coll_ + "/msg", "hello from a source file\n");
    // `./msg` is a source path: its NAR travels with the .drvs.
    writeFile(coll_ + "/default.nix", R"({
  a = derivation { name = "a"; system = "x86_64-linux"; builder = "/bin/sh";
                   args = [ "-c" "read x < ${./msg}; echo $x > $out" ]; };
  b = derivation { name = "b"; system = "x86_64-linux"; builder = "/bin/sh";
                   args = [ "-c" "echo b > $out" ]; };
  broken = throw "this job is broken";
})");
    ASSERT_EQ(kiln({"project", "create", "demo"}).exitCode, 0);
    auto r = kiln({"jobset", "create", "--project", "demo", "main",
                   "--location", coll_, "--check-interval", "0"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
  }

  // `kiln ARGS --database URL`.
  test::RunResult kiln(std::vector<std::string> args) {
    args.insert(args.begin(), test::kilnBinary());
    args.insert(args.end(), {"--database", url_});
    return test::run(args);
  }

  std::unique_ptr<test::KilnProcess> evaluator(const std::string& name) {
    auto p = std::make_unique<test::KilnProcess>(
        std::vector<std::string>{"evaluator", "--state-dir",
                                 dir_.path() + "/" + name, "--database", url_,
                                 "--name", name, "--lease", "5"},
        dir_.path() + "/" + name + ".log");
    EXPECT_TRUE(p->waitForLog("waiting for work", 30s)) << p->log();
    return p;
  }

  // The scheduler, remote evaluations; returns it and its endpoint.
  std::unique_ptr<test::KilnProcess> scheduler(std::string* endpoint) {
    auto p = std::make_unique<test::KilnProcess>(
        std::vector<std::string>{"scheduler", "--state-dir", dir_.path() + "/s",
                                 "--database", url_, "--listen",
                                 "tcp://127.0.0.1:*", "--insecure-plaintext",
                                 "--evaluations", "remote"},
        dir_.path() + "/s.log");
    EXPECT_TRUE(p->waitForLog("listening tcp://", 30s)) << p->log();
    std::string log = p->log();
    log = log.substr(log.find("listening tcp://") + 10);
    *endpoint = log.substr(0, log.find_first_of("\n "));
    return p;
  }

  nlohmann::json evaluation(int64_t id) {
    auto r = kiln({"evaluation", "show", std::to_string(id), "--json"});
    if (r.exitCode != 0) return nullptr;
    return nlohmann::json::parse(r.out);
  }

  std::string sql(const std::string& q) { return pg_->psql(q, url_).out; }

  TempDir dir_{"kiln-remote-eval"};
  std::unique_ptr<test::PostgresServer> pg_;
  std::string url_, coll_;
};

TEST_F(RemoteEvaluator, EvaluatesOnItsOwnHostAndTheSchedulerBuilds) {
  std::string endpoint;
  auto sched = scheduler(&endpoint);
  auto e1 = evaluator("e1");
  auto r = kiln({"jobset", "eval", "--project", "demo", "main", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err << sched->log() << e1->log();
  EXPECT_THAT(r.out, HasSubstr("\"eval\":1"));
  test::KilnProcess worker(
      {"worker", "--connect", endpoint, "--insecure-plaintext", "--state-dir",
       dir_.path() + "/w", "--private-store"},
      dir_.path() + "/w.log");
  ASSERT_TRUE(test::pollUntil(
      [&] {
        auto e = evaluation(1);
        return e.is_object() && e.value("finished", 0) == 2;
      },
      60s))
      << evaluation(1).dump() << sched->log() << worker.log();
  EXPECT_EQ(evaluation(1).value("succeeded", 0), 2) << evaluation(1).dump();
  EXPECT_THAT(kiln({"evaluation", "show", "1"}).out,
              HasSubstr("this job is broken"));
  // The evaluation ran on the evaluator's host, the scheduler imported it,
  // and nothing of it waits in the database any more.
  EXPECT_TRUE(pathExists(dir_.path() + "/e1/eval/1"));
  EXPECT_FALSE(pathExists(dir_.path() + "/s/eval/1"));
  EXPECT_THAT(e1->log(), HasSubstr("published evaluation result"));
  EXPECT_THAT(sched->log(), HasSubstr("importing evaluation result"));
  EXPECT_EQ(sql("SELECT count(*) FROM eval_results"), "0\n");
  EXPECT_EQ(sql("SELECT count(*) FROM eval_result_chunks"), "0\n");
  EXPECT_EQ(sql("SELECT count(*) FROM eval_claims"), "0\n");
  // One request, one evaluation: it was answered with the result's record.
  EXPECT_EQ(sql("SELECT count(*) FROM evaluations"), "1\n");

  // Scheduled checks: a changed collection is evaluated on its own.
  writeFile(coll_ + "/msg", "a new message\n");
  r = kiln({"jobset", "create", "--project", "demo", "every-second",
            "--location", coll_, "--check-interval", "1"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  ASSERT_TRUE(test::pollUntil(
      [&] {
        auto e = evaluation(2);
        return e.is_object() && e.value("finished", 0) == 2;
      },
      60s))
      << evaluation(2).dump() << sched->log() << e1->log();
  EXPECT_EQ(evaluation(2).value("succeeded", 0), 2);
  EXPECT_EQ(e1->stop(), 0) << e1->log();
  EXPECT_EQ(worker.stop(), 0);
  EXPECT_EQ(sched->stop(), 0) << sched->log();
}

// A claim held by an evaluator that stopped renewing it (it died) passes
// to another one only once its lease has ended.
TEST_F(RemoteEvaluator, AnotherEvaluatorTakesOverAClaimWhoseLeaseEnded) {
  std::string endpoint;
  auto sched = scheduler(&endpoint);
  std::string leaseEnd =
      sql("SELECT (extract(epoch from now()) * 1000)::bigint + 4000");
  leaseEnd.pop_back();
  ASSERT_EQ(sql("INSERT INTO eval_claims (jobset, evaluator, claimed, "
                "lease_until) VALUES (1, 'dead-host', 0, " +
                leaseEnd + ") RETURNING jobset"),
            "1\n");
  test::KilnProcess request({"jobset", "eval", "--project", "demo", "main",
                             "--json", "--database", url_},
                            dir_.path() + "/request.log");
  auto e2 = evaluator("e2");
  ASSERT_TRUE(request.waitExit(60s)) << request.log() << e2->log();
  EXPECT_EQ(request.exitCode(), 0) << request.log() << e2->log();
  EXPECT_THAT(request.log(), HasSubstr("\"eval\":1"));
  // It started after the dead evaluator's lease ended.
  std::string started = sql("SELECT time FROM evaluations WHERE id = 1");
  ASSERT_FALSE(started.empty());
  EXPECT_GE(std::stoll(started), std::stoll(leaseEnd));
  EXPECT_THAT(e2->log(), HasSubstr("evaluating jobset main"));
  EXPECT_EQ(e2->stop(), 0);
  EXPECT_EQ(sched->stop(), 0) << sched->log();
}

// A result whose stream is not one (or lies about its size) is recorded as
// a failed evaluation saying why, and is removed.
TEST_F(RemoteEvaluator, AMalformedResultIsAFailedEvaluation) {
  std::string endpoint;
  auto sched = scheduler(&endpoint);
  ASSERT_EQ(sql("INSERT INTO eval_results (jobset, evaluator, created, "
                "chunks, bytes) VALUES (1, 'liar', 0, 1, 5) RETURNING id"),
            "1\n");
  ASSERT_EQ(sql("INSERT INTO eval_result_chunks (result, seq, data) VALUES "
                "(1, 0, 'aGVsbG8=') RETURNING seq"),
            "0\n");
  ASSERT_TRUE(test::pollUntil([&] { return evaluation(1).is_object(); }, 30s))
      << sched->log();
  auto r = kiln({"evaluation", "show", "1"});
  EXPECT_THAT(r.out, HasSubstr("evaluator liar could not be imported"));
  EXPECT_EQ(sql("SELECT count(*) FROM eval_results"), "0\n");
  EXPECT_EQ(sql("SELECT count(*) FROM eval_result_chunks"), "0\n");
  EXPECT_EQ(sched->stop(), 0) << sched->log();
}

// A forge's push with remote evaluations (docs/ci.md): the scheduler
// queues a `jobset-eval` request at the pushed commit, an evaluator host
// claims it and fetches and evaluates exactly that commit, though the
// branch has moved on since. A malformed revision is refused.
TEST_F(RemoteEvaluator, APushedCommitIsEvaluatedThere) {
  if (!test::haveProgram("git")) GTEST_SKIP() << "no git";
  std::string srv = dir_.path() + "/pkgs.git", work = dir_.path() + "/work";
  test::run({"git", "init", "-q", "--bare", srv});
  createDirs(work);
  test::git(work, {"init", "-q", "-b", "main"});
  auto commit = [&](const std::string& job) {
    writeFile(work + "/default.nix",
              "{ " + job + " = derivation { name = \"" + job +
                  "\"; system = \"x86_64-linux\"; builder = \"/bin/sh\"; "
                  "args = [ \"-c\" \"echo > $out\" ]; }; }\n");
    test::git(work, {"add", "-A"});
    test::git(work, {"commit", "-q", "-m", job});
    return test::git(work, {"rev-parse", "HEAD"});
  };
  std::string pushed = commit("first");
  commit("second");  // the branch's head now
  test::git(work, {"push", "-q", srv, "HEAD:main"});
  auto r =
      kiln({"jobset", "create", "--project", "demo", "tracked", "--kind", "git",
            "--location", srv, "--branch", "main", "--check-interval", "0"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::string endpoint;
  auto sched = scheduler(&endpoint);
  auto e1 = evaluator("e1");
  // What `kiln web` queues for a verified push webhook (forge_events.h).
  nlohmann::json event{{"kind", "push"}, {"repo", "octo/pkgs"},
                       {"urls", {srv}},  {"branch", "main"},
                       {"sha", pushed},  {"action", ""},
                       {"headRef", ""},  {"headUrl", ""}};
  nlohmann::json args{{"forge", "github"},
                      {"delivery", "push-1"},
                      {"projects", {"demo"}},
                      {"event", event}};
  sql("INSERT INTO requests (kind, args) VALUES ('forge-event', '" +
      args.dump() + "'); NOTIFY kiln_requests");
  std::string atPushed =
      "SELECT count(*) FROM evaluations WHERE inputs_hash = 'git:" + pushed +
      "'";
  ASSERT_TRUE(test::pollUntil([&] { return sql(atPushed) == "1\n"; }, 60s))
      << sched->log() << e1->log();
  EXPECT_EQ(sql("SELECT string_agg(b.job, ',') FROM builds b JOIN "
                "evaluations e ON e.id = b.eval WHERE e.inputs_hash = 'git:" +
                pushed + "'"),
            "first\n");
  EXPECT_THAT(e1->log(), HasSubstr("commit " + pushed));
  // Its request was answered; the evaluation ran on the evaluator's host.
  ASSERT_TRUE(test::pollUntil(
      [&] {
        return sql("SELECT count(*) FROM requests WHERE kind = 'jobset-eval' "
                   "AND done = 1 AND ok = 1") == "1\n";
      },
      30s))
      << sched->log();
  EXPECT_THAT(sched->log(), HasSubstr("importing evaluation result"));

  // A revision that is no commit id: the evaluator answers why.
  auto bad = kiln(
      {"jobset", "eval", "--project", "demo", "tracked", "--revision", "main"});
  EXPECT_NE(bad.exitCode, 0);
  EXPECT_THAT(bad.err + bad.out, HasSubstr("revision: a commit id"))
      << e1->log();
  EXPECT_EQ(e1->stop(), 0) << e1->log();
  EXPECT_EQ(sched->stop(), 0) << sched->log();
}

// The evaluator sends the evaluated checkout along; the scheduler keeps it
// in the central store, and `kiln web` serves it as the channel's
// nixexprs.tar.xz (issue 34).
TEST_F(RemoteEvaluator, TheChannelServesTheSourcesItEvaluated) {
  auto r =
      kiln({"jobset", "create", "--project", "demo", "release", "--location",
            coll_, "--check-interval", "0", "--channel-job", "a"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::string endpoint;
  auto sched = scheduler(&endpoint);
  auto e1 = evaluator("e1");
  r = kiln({"jobset", "eval", "--project", "demo", "release", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err << sched->log() << e1->log();
  EXPECT_THAT(e1->log(), HasSubstr("-source in "));
  test::KilnProcess worker(
      {"worker", "--connect", endpoint, "--insecure-plaintext", "--state-dir",
       dir_.path() + "/w", "--private-store"},
      dir_.path() + "/w.log");
  test::KilnProcess web({"web", "--database", url_, "--listen", "127.0.0.1:0",
                         "--state-dir", dir_.path() + "/s"},
                        dir_.path() + "/web.log");
  ASSERT_TRUE(web.waitForLog("web http://", 30s)) << web.log();
  std::string log = web.log();
  int port = std::stoi(log.substr(log.find("web http://127.0.0.1:") + 21));
  std::string tarball;
  ASSERT_TRUE(test::pollUntil(
      [&] {
        try {
          tarball = test::httpGet(
              port, "/jobset/demo/release/channel/latest/nixexprs.tar.xz");
          return true;
        } catch (const Error&) {
          return false;
        }
      },
      60s))
      << sched->log() << worker.log() << web.log();
  writeFile(dir_.path() + "/nixexprs.tar.xz", tarball);
  createDirs(dir_.path() + "/unpacked");
  auto tar = test::run({"tar", "-xJf", dir_.path() + "/nixexprs.tar.xz", "-C",
                        dir_.path() + "/unpacked"});
  ASSERT_EQ(tar.exitCode, 0) << tar.err;
  EXPECT_EQ(readFile(dir_.path() + "/unpacked/release/msg"),
            "hello from a source file\n");
  EXPECT_THAT(readFile(dir_.path() + "/unpacked/release/default.nix"),
              HasSubstr("this job is broken"));
  EXPECT_EQ(sql("SELECT count(*) FROM eval_sources WHERE path LIKE "
                "'/nix/store/%-source'"),
            "1\n");
  EXPECT_EQ(web.stop(), 0) << web.log();
  EXPECT_EQ(worker.stop(), 0);
  EXPECT_EQ(e1->stop(), 0) << e1->log();
  EXPECT_EQ(sched->stop(), 0) << sched->log();
}

TEST_F(RemoteEvaluator, RefusesBadOptions) {
  auto r = test::run(
      {test::kilnBinary(), "evaluator", "--state-dir", dir_.path() + "/e"});
  EXPECT_EQ(r.exitCode, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--database is required"));
  r = kiln({"evaluator", "--state-dir", dir_.path() + "/e", "--lease", "1"});
  EXPECT_EQ(r.exitCode, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--lease must be 5..3600"));
  r = test::run({test::kilnBinary(), "scheduler", "--state-dir",
                 dir_.path() + "/s", "--listen", "tcp://127.0.0.1:*",
                 "--insecure-plaintext", "--evaluations", "elsewhere"});
  EXPECT_EQ(r.exitCode, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--evaluations must be local or remote"));
}

}  // namespace
}  // namespace kiln
