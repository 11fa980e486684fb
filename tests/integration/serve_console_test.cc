// What `kiln serve` prints describes the builds it was asked for (issue
// 30): a real serve with its console captured. A state directory reused
// with a changed collection does not say "all builds finished" before the
// new builds finished; a failing evaluation prints its error and where to
// read it; a failing build prints the command that shows its log; one
// summary per change; bad input is one line and nothing left running.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln_process.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

// A collection of `jobs` derivations: each name maps to its shell script.
std::string collection(const std::map<std::string, std::string>& jobs,
                       const std::string& extra = "") {
  std::string text =
      "let mk = name: script: derivation { inherit name; system = "
      "builtins.currentSystem; PATH = \"/usr/bin:/bin\"; builder = "
      "\"/bin/sh\"; args = [ \"-c\" script ]; };\nin {\n";
  for (auto& [name, script] : jobs)
    text += "  " + name + " = mk \"" + name + "\" \"" + script + "\";\n";
  return text + extra + "}\n";
}

// The lines of `log`, and how many of them start with `prefix`.
size_t countLines(const std::string& log, const std::string& prefix) {
  size_t n = 0;
  for (auto& l : test::nonEmptyLines(log)) n += l.starts_with(prefix);
  return n;
}

class ServeConsole : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
    state_ = dir_.path() + "/state";
    coll_ = dir_.path() + "/coll";
    createDirs(coll_);
  }

  // Starts serve on the collection with one worker; its console goes to
  // `<dir>/serve-N.log`.
  std::unique_ptr<test::KilnProcess> start() {
    int port = test::freeLoopbackPort(), web = test::freeLoopbackPort();
    int metrics = test::freeLoopbackPort();
    return std::make_unique<test::KilnProcess>(
        std::vector<std::string>{
            "serve", "--state-dir", state_, "--workers", "1", "--listen",
            "tcp://127.0.0.1:" + std::to_string(port), "--metrics-port",
            std::to_string(metrics), "--web-listen",
            "127.0.0.1:" + std::to_string(web), "--check-interval", "0", coll_},
        dir_.path() + "/serve-" + std::to_string(++runs_) + ".log");
  }

  // Waits for `text` in serve's console (or its exit).
  bool waitFor(test::KilnProcess& serve, const std::string& text,
               std::chrono::seconds limit = 180s) {
    return test::pollUntil(
        [&] {
          return !serve.running() ||
                 serve.log().find(text) != std::string::npos;
        },
        limit);
  }

  TempDir dir_;
  std::string state_, coll_;
  int runs_ = 0;
};

TEST_F(ServeConsole, AReusedStateDirCountsOnlyTheNewEvaluation) {
  writeFile(coll_ + "/default.nix",
            collection({{"a", "echo a > $out"}, {"b", "echo b > $out"}}));
  {
    auto serve = start();
    ASSERT_TRUE(waitFor(*serve, "summary:")) << serve->log();
    EXPECT_THAT(serve->log(),
                HasSubstr("builds: 2/2 finished, 2 succeeded, 0 failed "
                          "(all builds finished)"));
    serve->signal(SIGINT);
    ASSERT_TRUE(serve->waitExit(90s));
  }
  // Changed: three jobs, one of them slow enough to be seen unfinished.
  writeFile(coll_ + "/default.nix",
            collection({{"a", "echo a2 > $out"},
                        {"c", "echo c > $out"},
                        {"slow", "sleep 3; echo s > $out"}}));
  auto serve = start();
  ASSERT_TRUE(waitFor(*serve, "summary:")) << serve->log();
  std::string log = serve->log();
  // Nothing claims to be finished before the new evaluation is in.
  auto evaluated = log.find("evaluation 2 of project serve");
  auto finished = log.find("(all builds finished)");
  ASSERT_NE(evaluated, std::string::npos) << log;
  EXPECT_LT(evaluated, finished) << log;
  EXPECT_THAT(log, Not(HasSubstr("builds: 2/2")));
  EXPECT_THAT(log, HasSubstr("builds: 3/3 finished, 3 succeeded, 0 failed "
                             "(all builds finished)"));
  EXPECT_THAT(log, HasSubstr("summary: 3 jobs, 3 succeeded, 0 failed"));
  // One summary for the change, however long serve keeps running.
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(countLines(serve->log(), "summary:"), 1u) << serve->log();
  serve->signal(SIGINT);
  EXPECT_TRUE(serve->waitExit(90s));
}

TEST_F(ServeConsole, AFailedEvaluationAndAFailedBuildAreShown) {
  writeFile(coll_ + "/default.nix",
            collection({{"good", "echo ok > $out"},
                        {"bad", "echo compiling; echo oops >&2; exit 3"}},
                       "  broken = throw \"this job is broken\";\n"));
  auto serve = start();
  ASSERT_TRUE(waitFor(*serve, "summary:")) << serve->log();
  std::string log = serve->log();
  EXPECT_THAT(log, HasSubstr("builds: 2/2 finished, 1 succeeded, 1 failed, 1 "
                             "job did not evaluate (kiln evaluation show 1 "
                             "--state-dir " +
                             state_));
  EXPECT_THAT(log, HasSubstr("(job bad) failed; log: kiln log --state-dir " +
                             state_ + " /nix/store/"));
  EXPECT_THAT(log, HasSubstr("summary: 2 jobs, 1 succeeded, 1 failed, 1 job "
                             "did not evaluate"));
  // The commands it names work.
  auto show = test::run(
      {test::kilnBinary(), "evaluation", "show", "1", "--state-dir", state_});
  EXPECT_EQ(show.exitCode, 0) << show.err;
  EXPECT_THAT(show.out, HasSubstr("broken:"));
  EXPECT_THAT(show.out, HasSubstr("this job is broken"));
  auto at = log.find("log: kiln log --state-dir " + state_ + " ");
  std::string drv = log.substr(at + 27 + state_.size());
  drv = drv.substr(0, drv.find_first_of("; \n"));
  auto shown =
      test::run({test::kilnBinary(), "log", "--state-dir", state_, drv});
  EXPECT_EQ(shown.exitCode, 0) << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("compiling"));

  // The whole evaluation fails: restricted evaluation refuses the import.
  writeFile(coll_ + "/default.nix", "import /etc/passwd\n");
  serve->signal(SIGINT);
  ASSERT_TRUE(serve->waitExit(90s));
  auto again = start();
  ASSERT_TRUE(waitFor(*again, "all of it:")) << again->log();
  log = again->log();
  EXPECT_THAT(log, HasSubstr("evaluation 2 of project serve, jobset coll "
                             "failed:\n"));
  EXPECT_THAT(log, HasSubstr("forbidden in restricted mode"));
  EXPECT_THAT(log, HasSubstr("all of it: kiln evaluation show 2 --state-dir " +
                             state_ + ", or http://127.0.0.1:"));
  ASSERT_TRUE(waitFor(*again, "summary:")) << again->log();
  EXPECT_THAT(again->log(), HasSubstr("1 evaluation failed"));
  again->signal(SIGINT);
  EXPECT_TRUE(again->waitExit(90s));
}

TEST_F(ServeConsole, BadInputIsOneLineAndStartsNothing) {
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {test::kilnBinary(), "serve"});
    return test::run(args);
  };
  auto r = run({});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err,
              HasSubstr("kiln serve --config examples/pkgset/kiln.toml"));
  r = run({"--state-dir", state_, dir_.path() + "/missing"});
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.err, HasSubstr("missing has no default.nix"));
  r = run({"--state-dir", state_, "--config", dir_.path() + "/missing.toml"});
  EXPECT_NE(r.exitCode, 0);
  EXPECT_THAT(r.err, HasSubstr("missing.toml"));
  writeFile(dir_.path() + "/afile", "");
  writeFile(coll_ + "/default.nix", collection({{"a", "echo a > $out"}}));
  r = run({"--state-dir", dir_.path() + "/afile", coll_});
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.err, HasSubstr("afile is not a folder kiln serve can read"));
  // A port in use: refused before anything starts.
  int taken = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(taken, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(taken, 1), 0);
  socklen_t len = sizeof a;
  ::getsockname(taken, reinterpret_cast<sockaddr*>(&a), &len);
  std::string web = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  r = run({"--state-dir", state_, "--web-listen", web, "--metrics-port",
           std::to_string(test::freeLoopbackPort()), coll_});
  ::close(taken);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot listen on " + web +
                               " (scheduler.web_listen, --web-listen)"));
  EXPECT_FALSE(pathExists(state_ + "/serve/scheduler.log") &&
               readFile(state_ + "/serve/scheduler.log").find("listening") !=
                   std::string::npos);
}

}  // namespace
}  // namespace kiln
