// Reproducibility checks through a real farm (`kiln serve --config`, two
// local workers, no sandbox; docs/release.md): with repeat_fraction 1.0
// every built step is built a second time on the other worker. A job that
// writes the time and a random id is found not deterministic: its build
// page (checked in headless Chromium) shows diffoscope's report, the
// jobset page and API list it; a job that writes a constant is "same"; a
// job whose second build fails is a failed check, its build a success.
// Screenshots are kept under <build>/test-artifacts/repro-check/.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cdp_browser.h"
#include "farm.h"
#include "kiln/common/file.h"
#include "kiln/scheduler/state_view.h"
#include "kiln_process.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using nlohmann::json;

constexpr const char* kCollection = R"(let
  mk = name: script: derivation {
    inherit name;
    system = builtins.currentSystem;
    PATH = "/usr/bin:/bin";
    builder = "/bin/sh";
    args = [ "-c" script ];
  };
in {
  stamp = mk "stamp" "date +%s%N > $out; cat /proc/sys/kernel/random/uuid >> $out";
  stable = mk "stable" "echo 'the same every time' > $out";
  # Succeeds once: the second build finds the first one's mark and fails.
  once = mk "once" "if [ -e @MARK@ ]; then exit 1; fi; touch @MARK@; echo once > $out";
})";

class ReproCheckFarm : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
    createDirs(collection_);
    std::string text = kCollection;
    for (size_t at; (at = text.find("@MARK@")) != std::string::npos;)
      text.replace(at, 6, dir_.path() + "/once-built");
    writeFile(collection_ + "/default.nix", text);
    artifacts_ = test::binaryDir() + "/test-artifacts/repro-check";
    createDirs(artifacts_);
  }

  /// Starts `kiln serve` with `workers` local workers, repeating every
  /// step of the jobset.
  void startServe(int workers) {
    writeFile(dir_.path() + "/kiln.toml",
              "state_dir = \"" + state_ +
                  "\"\n[scheduler]\nlisten = \"tcp://127.0.0.1:" +
                  std::to_string(test::freeLoopbackPort()) +
                  "\"\nweb_listen = \"127.0.0.1:" + std::to_string(web_) +
                  "\"\nmetrics_port = -1\n[local_workers]\ncount = " +
                  std::to_string(workers) +
                  "\nsandbox = \"none\"\n[[project]]\nname = \"rep\"\n"
                  "[[project.jobset]]\nname = \"main\"\npath = \"" +
                  collection_ +
                  "\"\ncheck_interval = 0\nrepeat_fraction = 1.0\n");
    serve_ = std::make_unique<test::KilnProcess>(
        std::vector<std::string>{"serve", "--config",
                                 dir_.path() + "/kiln.toml"},
        dir_.path() + "/serve.log");
  }
  void TearDown() override {
    if (serve_ && serve_->running()) serve_->stop();
  }

  json api(const std::string& path) {
    return json::parse(test::httpGet(web_, "/api" + path));
  }

  /// The build of `job` once the newest evaluation's builds all finished.
  int64_t finishedBuild(const std::string& job) {
    int64_t id = 0;
    test::pollUntil(
        [&] {
          try {
            auto v = scheduler::StateView::openIfExists(state_);
            if (!v || v->latestEvaluation() == 0) return false;
            auto c = v->buildCounts(v->latestEvaluation());
            if (c.all == 0 || c.finished != c.all) return false;
            for (auto& b : v->builds(v->latestEvaluation()))
              if (b.job == job) id = b.id;
            return id != 0;
          } catch (const Error&) {  // the scheduler is creating its state
            return false;
          }
        },
        180s);
    return id;
  }

  /// The build's reproducibility check once it has a verdict (and, when
  /// it differs, its report).
  json verdict(int64_t build) {
    json check;
    test::pollUntil(
        [&] {
          check = api("/build/" + std::to_string(build))["reproducibility"];
          if (!check.is_object()) return false;
          std::string s = check["state"];
          if (s == "pending" || s == "running") return false;
          return s != "differs" || !check["report"].get<std::string>().empty();
        },
        300s);
    return check;
  }

  TempDir dir_{"repro-check"};
  std::string collection_ = dir_.path() + "/src";
  std::string state_ = dir_.path() + "/state";
  int web_ = test::freeLoopbackPort();
  std::string artifacts_;
  std::unique_ptr<test::KilnProcess> serve_;
};

TEST_F(ReproCheckFarm, WithOneWorkerTheCheckWaitsAndSaysWhy) {
  startServe(1);
  int64_t stamp = finishedBuild("stamp");
  ASSERT_GT(stamp, 0) << serve_->log();
  json check;
  test::pollUntil(
      [&] {
        check = api("/build/" + std::to_string(stamp))["reproducibility"];
        return check.is_object() && check.contains("waiting");
      },
      60s);
  ASSERT_TRUE(check.is_object()) << serve_->log();
  EXPECT_EQ(check["state"], "pending");
  EXPECT_THAT(check["waiting"].get<std::string>(),
              HasSubstr("is the only worker connected"));
  EXPECT_THAT(test::httpGet(web_, "/build/" + std::to_string(stamp)),
              HasSubstr("id=\"repeat-waiting\""));
}

TEST_F(ReproCheckFarm,
       TimestampDiffersConstantIsSameAFailedRebuildIsAFailedCheck) {
  startServe(2);
  int64_t stamp = finishedBuild("stamp");
  int64_t stable = finishedBuild("stable");
  ASSERT_GT(stamp, 0) << serve_->log();

  json same = verdict(stable);
  ASSERT_TRUE(same.is_object()) << serve_->log();
  EXPECT_EQ(same["state"], "same") << same.dump(2) << serve_->log();
  json odd = verdict(stamp);
  ASSERT_TRUE(odd.is_object()) << serve_->log();
  EXPECT_EQ(odd["state"], "differs") << odd.dump(2) << serve_->log();
  EXPECT_EQ(odd["statusName"], "not-deterministic");
  EXPECT_EQ(odd["differing"], json::array({"out"}));
  // The second build ran on the other worker.
  EXPECT_NE(odd["secondWorker"], odd["firstWorker"]);
  EXPECT_NE(odd["secondWorker"], "");
  std::string report = odd["report"];
  EXPECT_THAT(report, HasSubstr("=== output out: diffoscope differs"));
  EXPECT_THAT(report, HasSubstr("@@")) << report;  // a unified diff
  // The published output stays the first build's; both NARs are kept.
  auto v = scheduler::StateView::openIfExists(state_);
  auto b = v->rows().build(stamp);
  ASSERT_TRUE(b);
  std::string side = state_ + "/repeat-checks";
  bool kept = false;
  for (auto& e : std::filesystem::directory_iterator(side))
    kept = kept || pathExists(e.path().string() + "/out.nar");
  EXPECT_TRUE(kept) << "no side NAR under " << side;
  EXPECT_EQ(b->status, 0) << "the build itself succeeded";

  // A second build that fails makes a failed check, not a failed build.
  json failed = verdict(finishedBuild("once"));
  EXPECT_EQ(failed["state"], "failed") << failed.dump(2);
  EXPECT_THAT(failed["report"].get<std::string>(),
              HasSubstr("the second build failed"));
  EXPECT_EQ(
      api("/build/" + std::to_string(finishedBuild("once")))["build"]["status"],
      0);

  // The scheduler recorded the evaluation's expected finish when it made
  // its builds: the overview says how far off it was.
  json last = api("/overview")["lastEstimate"];
  ASSERT_TRUE(last.is_object()) << serve_->log();
  EXPECT_EQ(last["eval"], 1);
  EXPECT_GT(last["estimatedMs"].get<int64_t>(), last["madeMs"].get<int64_t>());
  EXPECT_GT(last["actualMs"].get<int64_t>(), 0);

  // The jobset lists it; the constant job is not listed.
  json js = api("/jobset/rep/main");
  ASSERT_EQ(js["nonDeterministic"].size(), 1u) << js["nonDeterministic"];
  EXPECT_EQ(js["nonDeterministic"][0]["job"], "stamp");

  if (test::CdpBrowser::findChromium().empty())
    GTEST_SKIP() << "no chromium: the pages were checked over HTTP only";
  test::CdpBrowser browser(dir_.path() + "/chromium");
  auto page = browser.newPage(/*javascript=*/true);
  std::string base = "http://127.0.0.1:" + std::to_string(web_);
  page.navigate(base + "/build/" + std::to_string(stamp));
  page.waitFor("document.getElementById('diffoscope-report') !== null", 30s);
  EXPECT_THAT(page.text(), HasSubstr("not-deterministic"));
  std::string shown =
      page.evaluate("document.getElementById('diffoscope-report').textContent");
  EXPECT_THAT(shown, HasSubstr("diffoscope differs"));
  page.screenshot(artifacts_ + "/build-not-deterministic.png");
  page.navigate(base + "/build/" + std::to_string(stable));
  EXPECT_THAT(page.text(), HasSubstr("with the same NAR hashes"));
  page.navigate(base + "/jobset/rep/main");
  page.waitFor("document.getElementById('non-deterministic') !== null", 30s);
  EXPECT_THAT(page.evaluate("document.getElementById('non-deterministic')"
                            ".textContent")
                  .get<std::string>(),
              HasSubstr("stamp"));
  page.screenshot(artifacts_ + "/jobset-not-deterministic.png");
  page.navigate(base + "/");
  EXPECT_THAT(page.text(), HasSubstr("The last estimate (evaluation 1)"));
  page.screenshot(artifacts_ + "/overview-last-estimate.png");
}

}  // namespace
}  // namespace kiln
