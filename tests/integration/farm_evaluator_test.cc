// A jobset whose evaluator plugin is not loaded, end to end (issue 10): the
// scheduler runs with a plugin folder holding only the `builtin` evaluator
// and the `command` notifier, while a jobset made with the build tree's
// plugins names `nix`. That jobset's evaluation fails as a whole, naming
// the evaluators the scheduler did load, and the notifier gets
// `eval.failed` with the same error; a jobset on `builtin` still evaluates
// and a worker builds all of its jobs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "farm.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using nlohmann::json;

// A folder holding copies of the build tree's plugins `names`.
void copyPlugins(const std::string& dir,
                 const std::vector<std::string>& names) {
  createDirs(dir);
  for (auto& n : names) {
    std::string file = "kiln-plugin-" + n + ".so";
    std::filesystem::copy_file(
        test::binaryDir() + "/plugins/lib/" + file,
        dir + "/" + file);
  }
}

// The events the command notifier appended to `file`, one JSON per line.
std::vector<json> eventsIn(const std::string& file) {
  std::vector<json> out;
  if (!pathExists(file)) return out;
  std::istringstream lines(readFile(file));
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

TEST(FarmEvaluator, AnEvaluatorThatIsNotLoadedFailsOnlyItsJobsetsEvaluation) {
  KILN_SKIP_UNLESS_FARM_CAN_RUN();
  TempDir scratch("kiln-farm-evaluator");
  std::string plugins = scratch.path() + "/plugins";
  std::string events = scratch.path() + "/events";
  copyPlugins(plugins, {"builtin", "command"});
  test::FarmOptions o;
  o.schedulerArgs = {"--notify", "command:{ cat; echo; } >> " + events};
  o.schedulerEnv = {{"KILN_PLUGIN_PATH", plugins}};
  test::Farm farm(o);
  auto coll = farm.writeCollection("coll",
                                   "rec { a = mk \"a\" \"echo a > $out\" [];\n"
                                   "  b = mk \"b\" \"echo b > $out\" [ a ]; }");
  // Both made by the CLI, which loads the build tree's plugins (nix too).
  farm.createJobset("p", "ours", coll);
  auto r =
      farm.kiln({"jobset", "create", "--project", "p", "theirs", "--location",
                 coll, "--check-interval", "0", "--evaluator", "nix"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  farm.startScheduler();
  farm.addWorker();
  ASSERT_TRUE(farm.waitForWorkers(1, 60s)) << farm.worker(0).log();

  const std::string error =
      "jobset 'theirs': no evaluator plugin named 'nix' (loaded evaluator "
      "plugins: builtin;";
  int64_t failed = farm.evaluate("p", "theirs");
  auto summary = farm.view()->evaluationSummary(failed);
  ASSERT_TRUE(summary);
  EXPECT_THAT(summary->eval.error, HasSubstr(error));
  EXPECT_TRUE(farm.builds(failed).empty());

  int64_t good = farm.evaluate("p", "ours");
  ASSERT_TRUE(farm.waitForBuilds(good, 120s)) << farm.worker(0).log();
  auto builds = farm.builds(good);
  ASSERT_EQ(builds.size(), 2u);
  for (auto& b : builds) EXPECT_EQ(b.status, 0) << b.job << ": " << b.error;
  EXPECT_EQ(farm.steps().size(), 2u);  // nothing of `theirs` was queued

  // The notifier: eval.failed for `theirs` with the error, eval.finished
  // and both builds for `ours`.
  auto has = [&](const std::string& event, const std::string& jobset) {
    for (auto& e : eventsIn(events))
      if (e["event"] == event && e["jobset"]["name"] == jobset) return true;
    return false;
  };
  ASSERT_TRUE(
      test::pollUntil([&] { return has("eval.finished", "ours"); }, 60s))
      << farm.scheduler().log();
  json failedEvent;
  for (auto& e : eventsIn(events))
    if (e["event"] == "eval.failed") failedEvent = e;
  ASSERT_FALSE(failedEvent.is_null()) << readFile(events);
  EXPECT_EQ(failedEvent["jobset"]["name"], "theirs");
  EXPECT_EQ(failedEvent["eval"]["id"], failed);
  EXPECT_THAT(failedEvent["eval"]["error"].get<std::string>(),
              HasSubstr(error));
  EXPECT_TRUE(test::pollUntil(
      [&] {
        size_t n = 0;
        for (auto& e : eventsIn(events)) n += e["event"] == "build.finished";
        return n == 2;
      },
      60s))
      << readFile(events);
  EXPECT_EQ(farm.stopWorker(0), 0);
  EXPECT_EQ(farm.stopScheduler(), 0);
}

}  // namespace
}  // namespace kiln
