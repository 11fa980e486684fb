// `kiln serve` runs the main job: a scheduler, local workers with private
// stores, a jobset for the collection and its evaluation; it reports the
// builds finishing, answers on /metrics, and Ctrl-C stops everything.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <map>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln/scheduler/state_view.h"
#include "kiln/worker/sandbox.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Why serve's default `linux` sandbox cannot run on this host (the kernel
// refuses unprivileged user namespaces, ...), or "".
std::string linuxSandboxRefusal() {
  plugins::PluginRegistry registry;
  registry.loadDirectories({test::pluginBuildDir()});
  worker::PluginSandbox sandbox(
      registry.require(KILN_PLUGIN_SANDBOX, "linux"),
      {{"extra-paths", worker::kDefaultLinuxExtraPaths}});
  return sandbox.probe();
}

TEST(Serve, BuildsTheExampleCollectionAndStopsCleanlyOnCtrlC) {
  std::string why;
  if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
  if (!test::haveProgram("nix-instantiate")) GTEST_SKIP() << "no Nix";
  if (auto refusal = linuxSandboxRefusal(); !refusal.empty())
    GTEST_SKIP() << "kiln serve's default linux sandbox cannot run here: "
                 << refusal;
  TempDir dir;
  std::string state = dir.path() + "/state";
  int port = test::freeLoopbackPort(), metrics = test::freeLoopbackPort();
  int web = test::freeLoopbackPort();
  test::KilnProcess serve(
      {"serve", "--state-dir", state, "--workers", "2", "--listen",
       "tcp://127.0.0.1:" + std::to_string(port), "--metrics-port",
       std::to_string(metrics), "--web-listen",
       "127.0.0.1:" + std::to_string(web), "--check-interval", "0",
       test::sourceDir() + "/examples/hello"},
      dir.path() + "/serve.log");
  ASSERT_TRUE(test::pollUntil(
      [&] {
        return !serve.running() ||
               serve.log().find("(all builds finished)") != std::string::npos;
      },
      180s))
      << serve.log();
  ASSERT_TRUE(serve.running()) << serve.log();
  std::string out = serve.log();
  EXPECT_THAT(out, HasSubstr("metrics:    http://127.0.0.1:" +
                             std::to_string(metrics) + "/metrics"));
  EXPECT_THAT(
      out,
      HasSubstr("dashboard:  http://127.0.0.1:" + std::to_string(web) + "/"));
  EXPECT_THAT(out, HasSubstr("kiln queue --state-dir " + state));
  EXPECT_THAT(out, HasSubstr("builds: 4/4 finished, 4 succeeded, 0 failed"));
  auto text = test::httpGet(metrics, "/metrics");
  EXPECT_EQ(test::prometheusSample(text, "kiln_workers"), 2.0) << text;

  serve.signal(SIGINT);
  auto code = serve.waitExit(90s);
  ASSERT_TRUE(code) << serve.log();
  EXPECT_EQ(*code, 0) << serve.log();
  EXPECT_THAT(serve.log(), HasSubstr("stopping"));
  // Everything stopped: nobody holds the scheduler's lock any more, and the
  // outputs are in the central store.
  auto q = test::run({test::kilnBinary(), "jobset", "eval", "--project",
                      "serve", "hello", "--state-dir", state});
  EXPECT_EQ(q.exitCode, 1) << q.err;
  EXPECT_THAT(q.err, HasSubstr("no scheduler is running"));
  auto v = test::run(
      {test::kilnBinary(), "store", "verify", "--state-dir", state, "--json"});
  EXPECT_EQ(v.exitCode, 0) << v.out << v.err;
}

// The pid serve printed for child `name` (banner or latest restart line).
pid_t childPid(const std::string& log, const std::string& name) {
  pid_t pid = -1;
  auto restart = name + " restarted (restart ";
  for (auto& line : test::nonEmptyLines(log)) {
    if (line.starts_with("  processes:")) {
      auto at =
          line.find(name == "scheduler" ? "scheduler " : ", " + name + " ");
      if (at != std::string::npos)
        pid = std::stoi(line.substr(line.find(' ', at + 2) + 1));
    } else if (auto at = line.find(restart); at != std::string::npos) {
      pid = std::stoi(line.substr(line.find(", pid ", at) + 6));
    }
  }
  return pid;
}

// Steps finished in the state database, by name (the derivation's).
std::map<std::string, bool> finishedSteps(const std::string& state) {
  std::map<std::string, bool> done;
  try {
    if (auto v = scheduler::StateView::openIfExists(state))
      for (auto& s : v->steps()) done[s.pname] = s.finished;
  } catch (const Error&) {  // the scheduler is creating its database
  }
  return done;
}

size_t countFinished(const std::map<std::string, bool>& steps) {
  size_t n = 0;
  for (auto& [name, f] : steps) n += f;
  return n;
}

// How often each builder ran to its end (a line per run in `file`).
std::map<std::string, int> runsIn(const std::string& file) {
  std::map<std::string, int> runs;
  if (pathExists(file))
    for (auto& l : test::nonEmptyLines(readFile(file))) runs[l]++;
  return runs;
}

// The last `lines` lines of each log under serve's directory, for a failure
// message: the scheduler's and the workers' own words on what got stuck.
std::string serveLogTails(const std::string& state, size_t lines = 60) {
  std::string out;
  for (auto name : {"scheduler.log", "local-0.log", "local-1.log"}) {
    auto path = state + "/serve/" + name;
    if (!pathExists(path)) continue;
    auto all = test::nonEmptyLines(readFile(path));
    out += "\n--- " + path + " (last lines) ---\n";
    for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size();
         i++)
      out += all[i] + "\n";
  }
  return out;
}

// issue 11: serve restarts what dies. 300 steps on 2 workers; a worker is
// SIGKILLed, then the scheduler; serve restarts each, every build
// succeeds, and no step that had finished is built again.
TEST(Serve, RestartsAKilledWorkerAndSchedulerAndFinishesEveryBuild) {
  std::string why;
  if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
  TempDir dir;
  std::string state = dir.path() + "/state", runs = dir.path() + "/runs";
  createDirs(dir.path() + "/many");
  writeFile(dir.path() + "/many/default.nix", R"(builtins.listToAttrs
  (builtins.genList (i: rec {
    name = "s${toString i}";
    value = derivation {
      inherit name; system = "x86_64-linux"; builder = "/bin/sh";
      PATH = "/usr/bin:/bin";
      args = [ "-c" "sleep 0.05; echo ${name} > $out; echo ${name} >> )" +
                                                  runs + R"(" ];
    };
  }) 300))");
  int port = test::freeLoopbackPort(), metrics = test::freeLoopbackPort();
  int web = test::freeLoopbackPort();
  test::KilnProcess serve(
      {"serve", "--state-dir", state, "--workers", "2", "--sandbox", "none",
       "--listen", "tcp://127.0.0.1:" + std::to_string(port), "--metrics-port",
       std::to_string(metrics), "--web-listen",
       "127.0.0.1:" + std::to_string(web), "--check-interval", "0",
       dir.path() + "/many"},
      dir.path() + "/serve.log");
  auto killWhen = [&](const std::string& child, size_t finished) {
    std::map<std::string, bool> steps;
    EXPECT_TRUE(test::pollUntil(
        [&] {
          steps = finishedSteps(state);
          return countFinished(steps) >= finished || !serve.running();
        },
        300s));
    EXPECT_LT(countFinished(steps), 300u) << "the run ended before the kill";
    pid_t pid = childPid(serve.log(), child);
    EXPECT_GT(pid, 0) << serve.log();
    if (pid > 0) ::kill(pid, SIGKILL);
    return std::make_pair(steps, runsIn(runs));
  };
  auto [stepsAtWorkerKill, runsAtWorkerKill] = killWhen("local-0", 40);
  ASSERT_TRUE(test::pollUntil(
      [&] {
        return serve.log().find("local-0 restarted") != std::string::npos;
      },
      60s))
      << serve.log();
  auto [stepsAtSchedKill, runsAtSchedKill] = killWhen("scheduler", 120);
  ASSERT_TRUE(test::pollUntil(
      [&] {
        return !serve.running() ||
               serve.log().find("(all builds finished)") != std::string::npos;
      },
      600s))
      << serve.log() << serveLogTails(state);
  std::string out = serve.log();
  EXPECT_THAT(out, HasSubstr("builds: 300/300 finished, 300 succeeded"));
  EXPECT_THAT(out, HasSubstr("local-0 exited (killed by signal 9"));
  EXPECT_THAT(out, HasSubstr("scheduler exited (killed by signal 9"));
  EXPECT_THAT(out, HasSubstr("scheduler restarted (restart 1"));
  auto after = runsIn(runs);
  int twice = 0;
  for (int i = 0; i < 300; i++) {
    std::string name = "s" + std::to_string(i);
    EXPECT_GE(after[name], 1) << name;
    EXPECT_LE(after[name], 2) << name;
    twice += after[name] > 1;
    // A step finished before a kill is never built again.
    if (stepsAtWorkerKill[name]) {
      EXPECT_EQ(after[name], runsAtWorkerKill[name]) << name;
    }
    if (stepsAtSchedKill[name]) {
      EXPECT_EQ(after[name], runsAtSchedKill[name]) << name;
    }
  }
  // Only steps running at a kill may have run twice: at most a slot per
  // worker at each of the two kills.
  EXPECT_LE(twice, 4);
  RecordProperty("steps_run_twice", twice);
  serve.signal(SIGINT);
  auto code = serve.waitExit(90s);
  ASSERT_TRUE(code) << serve.log();
  EXPECT_EQ(*code, 0) << serve.log();
  auto v =
      test::run({test::kilnBinary(), "store", "verify", "--state-dir", state});
  EXPECT_EQ(v.exitCode, 0) << v.out << v.err;
}

// issue 11: only serve's own workers join its scheduler. A worker with a
// key of its own is refused by the scheduler's allow-list.
TEST(Serve, AWorkerWithoutServesKeysIsRefused) {
  std::string why;
  if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
  TempDir dir;
  std::string state = dir.path() + "/state";
  createDirs(dir.path() + "/empty");
  writeFile(dir.path() + "/empty/default.nix", "{ }");
  int port = test::freeLoopbackPort(), metrics = test::freeLoopbackPort();
  int web = test::freeLoopbackPort();
  std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  test::KilnProcess serve(
      {"serve", "--state-dir", state, "--workers", "1", "--sandbox", "none",
       "--listen", endpoint, "--metrics-port", std::to_string(metrics),
       "--web-listen", "127.0.0.1:" + std::to_string(web), "--check-interval",
       "0", dir.path() + "/empty"},
      dir.path() + "/serve.log");
  ASSERT_TRUE(test::pollUntil(
      [&] {
        auto v = test::prometheusSample(
            [&] {
              try {
                return test::httpGet(metrics, "/metrics");
              } catch (const Error&) {
                return std::string();
              }
            }(),
            "kiln_workers");
        return !serve.running() || (v && *v == 1.0);
      },
      120s))
      << serve.log();
  // The keys: private to root.
  struct stat st;
  ASSERT_EQ(::stat((state + "/serve/keys").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((state + "/serve/keys/scheduler.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  auto gen = test::run({test::kilnBinary(), "key", "generate", "--out",
                        dir.path() + "/intruder", "--name", "w"});
  ASSERT_EQ(gen.exitCode, 0) << gen.err;
  auto intruder = test::run(
      {test::kilnBinary(), "worker", "--connect", endpoint, "--state-dir",
       dir.path() + "/intruder/state", "--private-store", "--sandbox", "none",
       "--secret-key-file", dir.path() + "/intruder/w.key",
       "--server-public-key-file", state + "/serve/keys/scheduler.pub"});
  EXPECT_EQ(intruder.exitCode, 1) << intruder.out << intruder.err;
  EXPECT_THAT(intruder.out + intruder.err,
              HasSubstr("refused this worker's key"));
  EXPECT_THAT(readFile(state + "/serve/scheduler.log"),
              HasSubstr("is not in the allow-list"));
  serve.signal(SIGINT);
  EXPECT_EQ(serve.waitExit(90s), std::optional<int>(0)) << serve.log();
}

}  // namespace
}  // namespace kiln
