// Evaluator plugins as runners (PluginEvaluators): the plugin's job lines
// are checked and completed from the `.drv` in the central store; a plugin
// that fails, one built without `evaluate`, an unknown name and a host
// refusal all become errors with their reason, never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "kiln/scheduler/evaluation.h"
#include "service_fixture.h"
#include "test_support.h"

namespace kiln::scheduler {
namespace {

using ::testing::HasSubstr;

class PluginEvaluatorsTest : public ::testing::Test {
 protected:
  PluginEvaluatorsTest() {
    registry_.loadDirectories({test::testPluginDir() + "/good"});
    store::LocalStore store(state());
    drv_ = testing::makeDrv(store, "hello");
    createDirs(work());
  }
  std::string state() const { return dir_.path() + "/state"; }
  std::string work() const { return dir_.path() + "/work"; }

  // Evaluates jobset `js` with the test evaluator configured by `config`.
  std::vector<Job> evaluate(plugins::PluginConfig config,
                            const std::string& plugin = "test-evaluator",
                            JobsetSpec js = {}) {
    PluginEvaluators evaluators(registry_, {{plugin, std::move(config)}});
    js.name = "demo";
    return evaluators.get(plugin).evaluate(js,
                                           Checkout{dir_.path(), "h", work()},
                                           EvalStore{state(), "/nix/store"});
  }

  TempDir dir_{"kiln-plugin-eval"};
  plugins::PluginRegistry registry_;
  std::string drv_;
};

TEST_F(PluginEvaluatorsTest, CompletesJobsFromTheirDrv) {
  JobsetSpec js;
  js.attribute = "pkgs";
  auto jobs =
      evaluate({{"lines", R"({"attr":"pkgs.hello","drvPath":")" + drv_ +
                              R"(","meta":{"timeout":60}})" + "\n" +
                              R"({"attr":"pkgs.broken","error":"it threw"})"}},
               "test-evaluator", js);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].attr, "hello");
  EXPECT_EQ(jobs[0].error, "");
  EXPECT_EQ(jobs[0].name, "hello");
  EXPECT_EQ(jobs[0].system, "x86_64-linux");
  EXPECT_EQ(jobs[0].timeoutSec, 60);
  ASSERT_EQ(jobs[0].outputs.count("out"), 1u);
  EXPECT_THAT(jobs[0].outputs["out"], HasSubstr("-hello"));
  EXPECT_EQ(jobs[1].attr, "broken");
  EXPECT_EQ(jobs[1].error, "it threw");
}

TEST_F(PluginEvaluatorsTest, ABadJobIsThatJobsErrorOnly) {
  std::string missing = "/nix/store/" + std::string(32, 'a') + "-gone.drv";
  auto jobs = evaluate(
      {{"lines",
        R"({"attr":"neg","drvPath":")" + drv_ + R"(","meta":{"timeout":-1}})" +
            "\n" + R"({"attr":"gone","drvPath":")" + missing + "\"}\n" +
            R"({"attr":"liar","system":"aarch64-linux","drvPath":")" + drv_ +
            "\"}\n" + R"({"attr":"ok","drvPath":")" + drv_ + "\"}"}});
  ASSERT_EQ(jobs.size(), 4u);
  EXPECT_THAT(jobs[0].error, HasSubstr("meta.timeout is negative"));
  EXPECT_THAT(jobs[1].error, HasSubstr("is not valid in the store"));
  EXPECT_THAT(jobs[2].error, HasSubstr("the .drv says x86_64-linux"));
  EXPECT_EQ(jobs[2].drvPath, "");
  EXPECT_EQ(jobs[3].error, "");
}

TEST_F(PluginEvaluatorsTest, FailuresAreErrorsWithTheirReason) {
  try {
    evaluate({{"fail", "syntax error at line 3"}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("evaluator 'test-evaluator': syntax error at line "
                          "3 (jobset demo)"));
  }
  // A line that is no job at all stops the evaluation.
  EXPECT_THROW(evaluate({{"lines", "not json"}}), Error);
  // The host refuses an import from outside the jobset's work folder.
  try {
    evaluate({{"import-root", "/etc"}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("not inside the jobset's work folder"));
  }
}

TEST_F(PluginEvaluatorsTest, UnknownOldAndBrokenPluginsAreNamed) {
  PluginEvaluators evaluators(registry_,
                              {{"test-evaluator", {{"fail-create", ""}}}});
  try {
    evaluators.get("guile");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no evaluator plugin named 'guile'"));
    EXPECT_THAT(e.what(), HasSubstr("test-evaluator"));
  }
  try {
    evaluators.get("test-evaluator-minor3");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("built against ABI minor 3, which has no "
                                    "evaluate function"));
  }
  try {
    evaluators.get("test-evaluator");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("evaluator told to fail"));
  }
}

}  // namespace
}  // namespace kiln::scheduler
