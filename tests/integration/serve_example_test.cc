// The README's command one, end to end, on a fresh state directory:
// `kiln serve --config examples/pkgset/kiln.toml` (its ports and state
// directory overridden, nothing else) starts the farm, every example job
// is built by the local workers in the linux sandbox and succeeds, the
// outputs are valid in the central store, the real `nix` substitutes them
// from the farm's binary cache (its key trusted) into a throwaway store
// where `nix store verify` accepts them, and a second evaluation of the
// unchanged collection builds nothing, as the scheduler's records show.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln/scheduler/state_view.h"
#include "kiln_process.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;
using nlohmann::json;

const std::string kConfig =
    test::sourceDir() + "/examples/pkgset/kiln.toml";

/// The newest evaluation's id once every build of it finished (0 if the
/// timeout passed or `giveUp` said so first).
int64_t waitForFinishedEvaluation(
    const std::string& state, int64_t after, std::chrono::seconds timeout,
    const std::function<bool()>& giveUp = [] { return false; }) {
  int64_t eval = 0;
  test::pollUntil(
      [&] {
        if (giveUp()) return true;
        auto v = scheduler::StateView::openIfExists(state);
        if (!v || v->latestEvaluation() <= after) return false;
        auto c = v->buildCounts(v->latestEvaluation());
        if (c.all == 0 || c.finished != c.all) return false;
        eval = v->latestEvaluation();
        return true;
      },
      timeout);
  return eval;
}

/// `nix ARGS...` with the throwaway settings the test's nix runs with.
test::RunResult nix(std::vector<std::string> args) {
  args.insert(args.begin(),
              {"nix", "--extra-experimental-features", "nix-command"});
  return test::run(args, "", {"NIX_REMOTE="});
}

class ServeExample : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
    if (!test::haveProgram("nix")) GTEST_SKIP() << "nix is not installed";
    setenv("NIX_CONFIG",
           "build-users-group =\nsubstituters =\nrequire-sigs = true\n", 1);
    setenv("XDG_CACHE_HOME", (dir_.path() + "/xdg").c_str(), 1);
  }

  /// Starts command one's farm and waits for its banner.
  void startServe() {
    serve_ = std::make_unique<test::KilnProcess>(
        std::vector<std::string>{
            "serve", "--config", kConfig, "--state-dir", state_, "--listen",
            "tcp://127.0.0.1:" + std::to_string(test::freeLoopbackPort()),
            "--web-listen", "127.0.0.1:" + std::to_string(web_),
            "--metrics-port", std::to_string(test::freeLoopbackPort()),
            "--check-interval", "0"},
        dir_.path() + "/serve.log");
    EXPECT_TRUE(serve_->waitForLog(
        "dashboard:  http://127.0.0.1:" + std::to_string(web_) + "/", 300s))
        << serve_->log();
  }

  std::string workerLogs() const {
    std::string logs;
    for (auto name : {"local-0", "local-1"}) {
      std::string f = state_ + "/serve/" + name + ".log";
      if (pathExists(f)) logs += std::string(name) + ":\n" + readFile(f);
    }
    return logs;
  }

  TempDir dir_{"serve-example"};
  std::string state_ = dir_.path() + "/state";
  int web_ = test::freeLoopbackPort();
  std::unique_ptr<test::KilnProcess> serve_;
};

TEST_F(ServeExample,
       CommandOneBuildsEverythingServesItToNixAndRebuildsNothing) {
  startServe();
  auto noSandbox = [&] {
    return workerLogs().find("sandbox cannot run on this host") !=
           std::string::npos;
  };
  int64_t first = waitForFinishedEvaluation(state_, 0, 900s, noSandbox);
  if (noSandbox()) GTEST_SKIP() << workerLogs();
  ASSERT_GT(first, 0) << serve_->log() << workerLogs();
  EXPECT_TRUE(serve_->waitForLog(" failed, ", 30s)) << serve_->log();
  EXPECT_THAT(serve_->log(), HasSubstr(" jobs, "));

  auto view = scheduler::StateView::openIfExists(state_);
  ASSERT_TRUE(view);
  auto builds = view->builds(first);
  EXPECT_GE(builds.size(), 20u);
  for (auto& b : builds) EXPECT_EQ(b.status, 0) << b.job << "\n" << b.error;
  // Every step ran on one of serve's local workers: the outputs were built
  // and uploaded, not added to the central store by hand.
  auto steps = view->steps();
  ASSERT_GE(steps.size(), builds.size());
  std::set<std::string> workers;
  for (auto& s : steps) {
    EXPECT_TRUE(s.finished && s.status == 0) << s.drvPath << ": " << s.error;
    EXPECT_THAT(s.worker, StartsWith("local-")) << s.drvPath;
    workers.insert(s.worker);
  }
  std::vector<std::string> outputs;
  for (auto& o : view->outputs(first)) outputs.push_back(o.path);
  ASSERT_GE(outputs.size(), builds.size());

  // Valid in the central store: every path's contents match its NAR hash.
  auto verify =
      test::run({test::kilnBinary(), "store", "verify", "--state-dir", state_});
  EXPECT_EQ(verify.exitCode, 0) << verify.out << verify.err;
  std::vector<std::string> info = {test::kilnBinary(), "store", "path-info",
                                   "--state-dir",      state_,  "--json"};
  info.insert(info.end(), outputs.begin(), outputs.end());
  auto kilnInfo = test::run(info);
  ASSERT_EQ(kilnInfo.exitCode, 0) << kilnInfo.err;
  std::map<std::string, std::string> kilnHashes;
  for (auto& p : json::parse(kilnInfo.out))
    kilnHashes[p["path"].get<std::string>()] = p["narHash"].get<std::string>();
  EXPECT_EQ(kilnHashes.size(), std::set(outputs.begin(), outputs.end()).size());

  // The real nix substitutes them from the farm's cache, signed by the
  // farm's key, and verifies them (contents and signatures).
  std::string key = readFile(state_ + "/serve/keys/cache.public");
  std::string target = "local?root=" + dir_.path() + "/nix";
  std::vector<std::string> copy = {"copy",
                                   "--from",
                                   "http://127.0.0.1:" + std::to_string(web_),
                                   "--to",
                                   target,
                                   "--option",
                                   "trusted-public-keys",
                                   key};
  copy.insert(copy.end(), outputs.begin(), outputs.end());
  auto copied = nix(copy);
  ASSERT_EQ(copied.exitCode, 0) << copied.err;
  std::vector<std::string> check = {"store", "verify",   "--store",
                                    target,  "--option", "trusted-public-keys",
                                    key};
  check.insert(check.end(), outputs.begin(), outputs.end());
  auto checked = nix(check);
  EXPECT_EQ(checked.exitCode, 0) << checked.out << checked.err;
  std::vector<std::string> pathInfo = {"path-info", "--store", target,
                                       "--json"};
  pathInfo.insert(pathInfo.end(), outputs.begin(), outputs.end());
  auto nixInfo = nix(pathInfo);
  ASSERT_EQ(nixInfo.exitCode, 0) << nixInfo.err;
  for (auto& p : json::parse(nixInfo.out))
    EXPECT_EQ(p["narHash"], kilnHashes[p["path"].get<std::string>()])
        << p["path"];

  // A second evaluation of the unchanged collection: its builds succeed
  // and no step was made or run for them.
  int64_t lastStep = steps.back().id;
  auto eval = test::run({test::kilnBinary(), "jobset", "eval", "--project",
                         "examples", "pkgset", "--state-dir", state_});
  ASSERT_EQ(eval.exitCode, 0) << eval.err;
  int64_t second = waitForFinishedEvaluation(state_, first, 300s);
  ASSERT_GT(second, first) << serve_->log();
  view = scheduler::StateView::openIfExists(state_);
  auto again = view->builds(second);
  EXPECT_EQ(again.size(), builds.size());
  for (auto& b : again) EXPECT_EQ(b.status, 0) << b.job;
  auto stepsAfter = view->steps();
  EXPECT_EQ(stepsAfter.size(), steps.size());
  for (auto& s : stepsAfter) EXPECT_LE(s.id, lastStep) << s.drvPath;
  for (size_t i = 0; i < std::min(steps.size(), stepsAfter.size()); i++)
    EXPECT_EQ(stepsAfter[i].attempts, steps[i].attempts) << steps[i].drvPath;
  EXPECT_EQ(serve_->stop(60s), 0) << serve_->log();
}

}  // namespace
}  // namespace kiln
