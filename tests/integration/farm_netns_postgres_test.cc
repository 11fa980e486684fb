// A PostgreSQL farm on nine hosts (issue 31, "Real components in tests"):
// a database host, two scheduler hosts (an active one and a `--standby`),
// two `kiln web` hosts, an evaluator host (`kiln evaluator`; the
// schedulers run `--evaluations remote`) and three worker hosts, each a
// network namespace of its own on one bridge (tests/support/netns_lab.h).
// The schedulers share one state directory, as on hosts mounting one
// shared path; the evaluator has its own. In turn:
//   1. an example-like collection builds on the workers, every build
//      succeeds, and both web hosts serve its evaluation;
//   2. the active scheduler is SIGKILLed while builds run: the standby
//      takes over, every build finishes, none is built twice;
//   3. PostgreSQL is stopped for 20 s while a further evaluation builds
//      (its steps outlast the outage): the scheduler holds the farm's lock
//      again, every build finishes, nothing is lost;
//   4. a web host is killed: the other still answers.
// A second test (FarmNetnsPostgresOutages) has a standby winning the lock
// after an outage while the old active may still take results, and
// results and dispatches falling within an outage.
// Operator commands and HTTP requests are made from the database host.
// Needs root (namespaces, --private-store), PostgreSQL, nix-instantiate
// and curl; skips saying why otherwise.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "kiln/common/file.h"
#include "kiln_process.h"
#include "netns_lab.h"
#include "postgres_server.h"
#include "test_support.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;
using Args = std::vector<std::string>;
using Clock = std::chrono::steady_clock;

constexpr const char* kSchedulerPort = "7470";
constexpr const char* kWebPort = "8080";
// Jobs (and steps) of each generation of the collection.
constexpr size_t kJobs = 9;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// `argv` run in the named network namespace.
test::RunResult runIn(const std::string& netns, Args argv) {
  argv.insert(argv.begin(), {"ip", "netns", "exec", netns});
  return test::run(argv);
}

// `pred` at most every 300 ms until `timeout`: each call starts processes
// (and a PostgreSQL session), which the two shared cores feel.
bool pollSlowly(const std::function<bool()>& pred,
                std::chrono::milliseconds timeout) {
  auto next = Clock::now();
  bool last = false;
  return test::pollUntil(
             [&] {
               if (Clock::now() < next) return false;
               next = Clock::now() + 300ms;
               return last = pred();
             },
             timeout) ||
         last;
}

// Generation `gen` of an example-like collection (examples/hello's chain
// and a nested job, plus four independent steps running the shell command
// `slowWait` before writing their output, and one needing them): 9 jobs
// whose derivations are the generation's own. Each builder first appends
// its name ("greeting-2") to `runs`.
std::string collection(int gen, const std::string& slowWait,
                       const std::string& runs) {
  std::string g = std::to_string(gen);
  return R"(let
  mk = name: script: deps: derivation {
    name = "${name}-)" +
         g + R"(";
    system = "x86_64-linux";
    PATH = "/usr/bin:/bin";
    builder = "/bin/sh";
    args = [ "-c" "echo ${name}-)" +
         g + " >> " + runs + R"(; ${script}" ];
    buildInputs = deps;
  };
  slow = i: mk "slow${toString i}" ")" +
         slowWait + R"(; echo ${toString i} > $out" [ ];
in rec {
  greeting = mk "greeting" "echo hello > $out" [ ];
  shout = mk "shout" "read -r g < ${greeting}; echo \"$g!\" > $out"
    [ greeting ];
  banner = mk "banner" "cat ${shout} ${greeting} > $out" [ shout greeting ];
  tools = {
    recurseForDerivations = true;
    lister = mk "lister" "ls / > $out" [ ];
  };
  slow0 = slow 0;
  slow1 = slow 1;
  slow2 = slow 2;
  slow3 = slow 3;
  report = mk "report" "cat ${slow0} ${slow1} ${slow2} ${slow3} > $out"
    [ slow0 slow1 slow2 slow3 ];
}
)";
}

class FarmNetnsPostgres : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!test::NetnsLab::canRun(&why)) GTEST_SKIP() << why;
    KILN_SKIP_UNLESS_POSTGRES();
    for (const char* tool : {"nix-instantiate", "curl"})
      if (!test::haveProgram(tool)) GTEST_SKIP() << tool << " is not on PATH";
    lab_ = std::make_unique<test::NetnsLab>(
        3, Args{"db", "sched-a", "sched-b", "web-a", "web-b", "eval"});
    pg_ = std::make_unique<test::PostgresServer>(lab_->hostNetns("db"),
                                                 lab_->hostAddress("db"));
    // Every kiln process inherits it, wherever it runs.
    setenv("PGPASSFILE", pg_->passFile().c_str(), 1);
    url_ = pg_->createDatabase("farm");
    if (std::getenv("KILN_KEEP_FARM")) dir_.keep();  // logs, for a look
    runs_ = dir_.path() + "/runs";
    createDirs(dir_.path() + "/coll");
  }

  // Processes end before PostgreSQL, PostgreSQL before its namespace.
  void TearDown() override {
    procs_.clear();
    pg_.reset();
    lab_.reset();
  }

  // `kiln ARGS --database URL` on the database host.
  test::RunResult kiln(Args args) {
    args.insert(args.begin(), test::kilnBinary());
    args.insert(args.end(), {"--database", url_});
    return runIn(lab_->hostNetns("db"), args);
  }

  // Starts `kiln ARGS` in namespace `netns` as process `name`, replacing
  // one of that name that ended.
  test::KilnProcess& start(const std::string& name, const std::string& netns,
                           const Args& args) {
    std::string log = dir_.path() + "/" + name + "." +
                      std::to_string(++starts_[name]) + ".log";
    procs_[name] = std::make_unique<test::KilnProcess>(
        args, log, std::map<std::string, std::string>{}, netns);
    return *procs_[name];
  }
  test::KilnProcess& proc(const std::string& name) { return *procs_.at(name); }

  std::string endpoint(const std::string& host) {
    return "tcp://" + lab_->hostAddress(host) + ":" + kSchedulerPort;
  }

  // `kiln scheduler` on host `host` ("sched-a", "sched-b").
  test::KilnProcess& startScheduler(const std::string& host, bool standby) {
    Args args = {"scheduler",
                 "--state-dir",
                 dir_.path() + "/state",
                 "--database",
                 url_,
                 "--listen",
                 endpoint(host),
                 "--insecure-plaintext",
                 "--heartbeat-ms",
                 "1000",
                 "--retry-backoff-ms",
                 "100",
                 "--evaluations",
                 "remote"};
    if (standby) args.push_back("--standby");
    return start(host, lab_->hostNetns(host), args);
  }

  // `kiln web` on host `host` ("web-a", "web-b"), waited for.
  void startWeb(const std::string& host) {
    auto& p = start(host, lab_->hostNetns(host),
                    {"web", "--database", url_, "--listen",
                     lab_->hostAddress(host) + ":" + kWebPort, "--state-dir",
                     dir_.path() + "/state"});
    ASSERT_TRUE(p.waitForLog("web http://", 30s)) << p.log();
  }

  // GET `path` from web host `host`, asked from the database host; the
  // body, or "" if it does not answer 200.
  std::string webGet(const std::string& host, const std::string& path) {
    auto r =
        runIn(lab_->hostNetns("db"),
              {"curl", "-sS", "--fail", "--max-time", "10",
               "http://" + lab_->hostAddress(host) + ":" + kWebPort + path});
    return r.exitCode == 0 ? r.out : "";
  }

  // Writes generation `gen` and evaluates it; returns the evaluation id.
  int64_t evaluate(int gen, const std::string& slowWait) {
    writeFile(dir_.path() + "/coll/default.nix",
              collection(gen, slowWait, runs_));
    auto r = kiln({"jobset", "eval", "--project", "demo", "main", "--json"});
    if (r.exitCode != 0) {
      ADD_FAILURE() << "jobset eval: " << r.err << logs();
      return 0;
    }
    return nlohmann::json::parse(r.out).value("eval", int64_t(0));
  }

  // `kiln evaluation show ID --json` ({} if it fails).
  nlohmann::json evaluation(int64_t id) {
    auto r = kiln({"evaluation", "show", std::to_string(id), "--json"});
    if (r.exitCode != 0) return nlohmann::json::object();
    return nlohmann::json::parse(r.out);
  }

  // Polls until every build of evaluation `id` finished.
  bool waitForEvaluation(int64_t id, std::chrono::milliseconds timeout) {
    return pollSlowly(
        [&] {
          auto e = evaluation(id);
          return e.value("builds", 0) > 0 &&
                 e.value("finished", 0) == e.value("builds", 0);
        },
        timeout);
  }

  // The builder runs of generation `gen`, in order ("slow0-2", ...).
  std::vector<std::string> runsOf(int gen) {
    std::vector<std::string> out;
    if (!pathExists(runs_)) return out;
    std::string suffix = "-" + std::to_string(gen);
    for (auto& line : test::nonEmptyLines(readFile(runs_)))
      if (line.ends_with(suffix)) out.push_back(line);
    return out;
  }
  bool aSlowStepRuns(int gen) {
    for (auto& r : runsOf(gen))
      if (r.starts_with("slow")) return true;
    return false;
  }

  // A single-row, single-column query's answer ("" on error).
  std::string sql(const std::string& query) {
    auto r = pg_->psql(query, url_);
    return r.exitCode == 0 ? r.out.substr(0, r.out.find('\n')) : "";
  }

  // The project and jobset, sched-a active, sched-b its standby, the
  // three workers (following sched-a, then sched-b) joined, and both web
  // hosts up.
  void startFarm() {
    auto r = kiln({"project", "create", "demo"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    r = kiln({"jobset", "create", "--project", "demo", "main", "--location",
              dir_.path() + "/coll", "--check-interval", "0"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    auto& active = startScheduler("sched-a", false);
    ASSERT_TRUE(active.waitForLog("listening tcp://", 30s)) << logs();
    auto& standby = startScheduler("sched-b", true);
    ASSERT_TRUE(standby.waitForLog("waiting to take over", 30s)) << logs();
    for (int i = 0; i < 3; i++) {
      std::string w = "w" + std::to_string(i);
      start(w, lab_->workerNetns(i),
            {"worker", "--connect",
             endpoint("sched-a") + "," + endpoint("sched-b"),
             "--insecure-plaintext", "--state-dir", dir_.path() + "/" + w,
             "--private-store", "--sandbox", "none", "--worker-id", w});
    }
    for (int i = 0; i < 3; i++)
      ASSERT_TRUE(
          active.waitForLog("worker w" + std::to_string(i) + " joined", 30s))
          << logs();
    startWeb("web-a");
    startWeb("web-b");
    auto& evaluator = start(
        "eval", lab_->hostNetns("eval"),
        {"evaluator", "--database", url_, "--state-dir",
         dir_.path() + "/evalhost", "--name", "eval-host", "--lease", "10"});
    ASSERT_TRUE(evaluator.waitForLog("waiting for work", 30s)) << logs();
  }

  // Polls until the three steps of generation `gen` that wait for a
  // release file run (one on each worker, every slot taken) and no other
  // step is between dispatch and result, nor a build's end unrecorded.
  bool waitForOnlyGatedSteps(int gen) {
    std::string g = std::to_string(gen);
    std::string query =
        "SELECT (SELECT count(*) FROM steps WHERE finished = 0 AND attempts "
        "> 0 AND drv_path LIKE '%-slow_-" +
        g +
        ".drv') || ',' || (SELECT count(*) FROM steps WHERE finished = 0 "
        "AND attempts > 0) || ',' || ((SELECT count(*) FROM builds WHERE "
        "eval = " +
        g +
        " AND finished = 1) - (SELECT count(*) FROM steps WHERE finished "
        "= 1 AND drv_path LIKE '%-" +
        g + ".drv'))";
    return pollSlowly([&] { return sql(query) == "3,3,0"; }, 120s);
  }

  // The release file of generation `gen`'s slow steps, and their wait
  // for it.
  std::string release(int gen) {
    return dir_.path() + "/release-" + std::to_string(gen);
  }
  std::string gate(int gen) {
    return "while [ ! -e " + release(gen) + " ]; do sleep 0.1; done";
  }

  // Stops PostgreSQL for 20 s and starts it again; returns when it was
  // told to start (its start takes 0.2 s, then the script checks it).
  Clock::time_point outage() {
    pg_->stop();
    std::this_thread::sleep_for(20s);  // the outage itself, not a wait
    auto starting = Clock::now();
    pg_->start();
    return starting;
  }

  // Polls until a scheduler holds the farm's (advisory) lock.
  bool waitForLockHolder() {
    return pollSlowly(
        [&] {
          // The farm's lock (7164351), not the writers' fence.
          return sql("SELECT count(*) FROM pg_locks WHERE locktype = "
                     "'advisory' AND objid = 7164351 AND granted") == "1";
        },
        60s);
  }

  // Evaluation `id` of generation `gen` finished within `timeout`, every
  // build succeeded, each builder ran once (the lines builders append to
  // `runs`) and no step was dispatched twice (`attempts`).
  void expectBuiltOnce(int64_t id, int gen, std::chrono::seconds timeout) {
    ASSERT_TRUE(waitForEvaluation(id, timeout))
        << evaluation(id).dump() << logs();
    auto e = evaluation(id);
    EXPECT_EQ(e.value("builds", 0), int(kJobs)) << e.dump();
    EXPECT_EQ(e.value("succeeded", 0), int(kJobs)) << e.dump() << logs();
    auto runs = runsOf(gen);
    EXPECT_EQ(runs.size(), kJobs) << readFile(runs_) << logs();
    EXPECT_EQ(std::set<std::string>(runs.begin(), runs.end()).size(), kJobs);
    std::string ofGen =
        "FROM steps WHERE drv_path LIKE '%-" + std::to_string(gen) + ".drv'";
    EXPECT_EQ(sql("SELECT max(attempts) " + ofGen), "1")
        << sql("SELECT string_agg(id || ' ' || substr(drv_path, 45) || "
               "' attempts ' || attempts || ' finished ' || finished || ' on ' "
               "|| worker, '; ' ORDER BY id) " +
               ofGen)
        << logs();
  }

  // The tail of every process's log and the server's, for failures.
  std::string logs() {
    std::string out;
    for (auto& [name, p] : procs_) {
      auto lines = test::nonEmptyLines(p->log());
      size_t from = lines.size() > 25 ? lines.size() - 25 : 0;
      out += "\n--- " + name + " (" + p->logFile() + ")\n";
      for (size_t i = from; i < lines.size(); i++) out += lines[i] + "\n";
    }
    return out + "\n--- postgres\n" + (pg_ ? pg_->logTail() : "");
  }

  TempDir dir_{"kiln-nspg"};
  std::unique_ptr<test::NetnsLab> lab_;
  std::unique_ptr<test::PostgresServer> pg_;
  std::string url_, runs_;
  std::map<std::string, std::unique_ptr<test::KilnProcess>> procs_;
  std::map<std::string, int> starts_;
};

TEST_F(FarmNetnsPostgres, BuildsFailsOverAndLivesThroughADatabaseOutage) {
  startFarm();
  if (HasFatalFailure()) return;
  auto& active = proc("sched-a");
  auto& standby = proc("sched-b");

  // 1. The collection builds across the hosts; both web hosts show it.
  int64_t first = evaluate(1, "true");
  ASSERT_EQ(first, 1);
  ASSERT_TRUE(waitForEvaluation(first, 120s))
      << evaluation(first).dump() << logs();
  auto e = evaluation(first);
  EXPECT_EQ(e.value("builds", 0), int(kJobs)) << e.dump();
  EXPECT_EQ(e.value("succeeded", 0), int(kJobs)) << e.dump();
  // It was evaluated on the evaluator's host, not the scheduler's.
  EXPECT_TRUE(pathExists(dir_.path() + "/evalhost/eval/1"));
  EXPECT_FALSE(pathExists(dir_.path() + "/state/eval/1"));
  for (const char* web : {"web-a", "web-b"}) {
    std::string body = webGet(web, "/api/eval/1");
    EXPECT_NE(body.find("\"banner\""), std::string::npos)
        << web << ": " << body;
    EXPECT_NE(body.find("\"tools.lister\""), std::string::npos) << body;
  }

  // 2. The active scheduler dies while steps build (3 s each): the
  // standby takes over, the workers follow it, and it adopts what they
  // were building.
  int64_t second = evaluate(2, "sleep 3");
  ASSERT_EQ(second, 2);
  ASSERT_TRUE(pollSlowly([&] { return aSlowStepRuns(2); }, 120s)) << logs();
  active.kill();
  auto killed = Clock::now();
  ASSERT_TRUE(standby.waitForLog("listening tcp://", 30s)) << logs();
  double takeOver = secondsSince(killed);
  EXPECT_LT(takeOver, 10.0);
  expectBuiltOnce(second, 2, 120s);
  if (HasFatalFailure()) return;
  std::cout << "take-over: the standby listened " << takeOver
            << " s after the SIGKILL; evaluation 2 finished after "
            << secondsSince(killed) << " s" << std::endl;

  // 3. PostgreSQL is away for 20 s while evaluation 3 builds: three of
  // its steps, one on each worker, wait for a release file written once
  // the scheduler holds the farm's lock again; no other step is between
  // dispatch and result when the server stops, and no standby runs (the
  // dead host's scheduler is not back): FarmNetnsPostgresOutages below
  // covers those two cases.
  int64_t third = evaluate(3, gate(3));
  ASSERT_EQ(third, 3);
  ASSERT_TRUE(waitForOnlyGatedSteps(3)) << logs();
  auto restarted = outage();
  ASSERT_TRUE(standby.waitForLog(") and is held again", 60s)) << logs();
  double lockBack = secondsSince(restarted);
  writeFile(release(3), "");
  expectBuiltOnce(third, 3, 120s);
  if (HasFatalFailure()) return;
  // Nothing lost: three generations' builds, steps and outputs.
  std::string all = std::to_string(3 * kJobs);
  EXPECT_EQ(sql("SELECT count(*) FROM builds WHERE finished = 1"), all);
  EXPECT_EQ(sql("SELECT count(*) FROM steps WHERE finished = 1"), all);
  EXPECT_EQ(sql("SELECT count(*) FROM build_outputs"), all);
  EXPECT_TRUE(standby.running()) << logs();
  std::cout << "PostgreSQL restart: the farm's lock held again " << lockBack
            << " s after the server was told to start, "
            << "evaluation 3 finished after " << secondsSince(restarted) << " s"
            << std::endl;

  // 4. A web host dies: the other answers.
  proc("web-a").kill();
  std::string body = webGet("web-b", "/api/eval/3");
  EXPECT_NE(body.find("\"report\""), std::string::npos) << body;
  EXPECT_EQ(webGet("web-a", "/api/eval/3"), "");
}

// Two PostgreSQL outages with a standby and results falling within them
// (issue 31). Each needs one of these: the writers' fence
// (scheduler_lock.h: once a standby read the state, the old active writes
// nothing), writes kept while the database is away
// (scheduler/src/deferred_writes.h), a dispatch failing on the database
// not counted as an attempt, and a worker's result acknowledged only once
// its record committed (docs/protocol.md, "Results"; protocol 5): the
// worker keeps it until then and gives it to whichever scheduler it
// follows next.
class FarmNetnsPostgresOutages : public FarmNetnsPostgres {};

TEST_F(FarmNetnsPostgresOutages, AStandbyTakingOverAndResultsDuringThem) {
  startFarm();
  if (HasFatalFailure()) return;

  // 1. The outage of the test above's step 3 with a standby running.
  // When PostgreSQL returns, the standby may win the lock (it polls each
  // second, as the active's checkLock does); the old active learns of it
  // at its next checkLock (up to 1 s) and exits. Results of steps released
  // meanwhile that reach the old active cannot be recorded there (the
  // fence refuses its writes once the standby waits for the state), so it
  // does not acknowledge them: their workers keep them and send them to
  // the new active, which adopted those steps. Nothing is dispatched
  // twice (attempts 1), nothing built twice. Whether the standby wins is
  // a race: either way the evaluation must end the same.
  int64_t first = evaluate(1, gate(1));
  ASSERT_EQ(first, 1);
  ASSERT_TRUE(waitForOnlyGatedSteps(1)) << logs();
  outage();
  ASSERT_TRUE(waitForLockHolder()) << logs();
  writeFile(release(1), "");
  expectBuiltOnce(first, 1, 120s);

  // 2. PostgreSQL away for 20 s while steps finish and others are due,
  // one scheduler alone. A result arriving then is settled in memory (the
  // core moves on) and its row's write waits in DeferredWrites, in order
  // with the build events that follow; its Ack waits for that write, so
  // the worker keeps the result meanwhile. A dispatch that needs the
  // database (a step's limits not in memory) is offered again later
  // without counting an attempt. Once PostgreSQL is back and the lock held
  // again, the writes go in, the Acks go out, and every build finishes
  // (before: a lost result, a step failing in memory after its retries
  // were spent on the outage, the evaluation stuck until a restart).
  for (const char* s : {"sched-a", "sched-b"})
    if (proc(s).running()) {
      // The one of them standing by (the other holds the lock) stops.
      std::string log = proc(s).log();
      bool standingBy = log.find("listening tcp://") == std::string::npos;
      if (standingBy) {
        EXPECT_EQ(proc(s).stop(), 0) << logs();
      }
    }
  int64_t second = evaluate(2, "sleep 3");
  ASSERT_EQ(second, 2);
  ASSERT_TRUE(pollSlowly([&] { return aSlowStepRuns(2); }, 120s)) << logs();
  outage();
  ASSERT_TRUE(waitForLockHolder()) << logs();
  expectBuiltOnce(second, 2, 120s);
}

}  // namespace
}  // namespace kiln
