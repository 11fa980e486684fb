// Release engineering through a real farm (`kiln serve --config`, one local
// worker, no sandbox) on tests/data/release, a collection gated by a
// `tested` aggregate job: while a constituent fails, the aggregate fails
// naming it (build page and API) and the channel stays where it was; once
// fixed, the aggregate succeeds, the channel advances to that evaluation
// and the real `nix` substitutes the channel's store-paths.xz from the
// farm's binary cache; a job whose closure then grows past the jobset's
// limit holds the channel, and the evaluation lists it; `kiln store gc
// --keep-evaluations 1` collects the sources of an evaluation neither the
// latest nor the channel's, its dry run listing what it deletes, and the
// channel's nixexprs.tar.xz is still served.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cdp_browser.h"
#include "farm.h"
#include "kiln/common/file.h"
#include "kiln/scheduler/release_store.h"
#include "kiln/scheduler/state_view.h"
#include "kiln/store/local_store.h"
#include "kiln_process.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using nlohmann::json;

// The farm's config: one local worker without sandbox, project "rel" with
// jobset "release" on `collection`, evaluated on demand only, held when a
// job's closure grows more than 50 %.
std::string configText(const std::string& dir, const std::string& collection,
                       int port, int web) {
  return "state_dir = \"" + dir + "/state\"\n[scheduler]\n" +
         "listen = \"tcp://127.0.0.1:" + std::to_string(port) +
         "\"\nweb_listen = \"127.0.0.1:" + std::to_string(web) +
         "\"\nmetrics_port = -1\n[local_workers]\ncount = 1\n" +
         "sandbox = \"none\"\n[[project]]\nname = \"rel\"\n" +
         "[[project.jobset]]\nname = \"release\"\npath = \"" + collection +
         "\"\ncheck_interval = 0\nmax_closure_growth = 50\n";
}

const std::string kChannel = "/jobset/rel/release/channel/latest";

class ReleaseFarm : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
    setenv("NIX_CONFIG",
           "build-users-group =\nsubstituters =\nrequire-sigs = true\n", 1);
    setenv("XDG_CACHE_HOME", (dir_.path() + "/xdg").c_str(), 1);
    std::filesystem::copy(test::sourceDir() + "/tests/data/release",
                          collection_);
    writeFile(collection_ + "/broken", "");
    writeFile(
        dir_.path() + "/kiln.toml",
        configText(dir_.path(), collection_, test::freeLoopbackPort(), web_));
  }

  /// Starts the farm, which evaluates the collection as it is now.
  void startServe() {
    serve_ = std::make_unique<test::KilnProcess>(
        std::vector<std::string>{"serve", "--config",
                                 dir_.path() + "/kiln.toml"},
        dir_.path() + "/serve.log");
  }

  /// The newest evaluation after `after` once its builds all finished.
  int64_t finishedEvaluation(int64_t after) {
    int64_t eval = 0;
    test::pollUntil(
        [&] {
          try {
            auto v = scheduler::StateView::openIfExists(state_);
            if (!v || v->latestEvaluation() <= after) return false;
            auto c = v->buildCounts(v->latestEvaluation());
            if (c.all == 0 || c.finished != c.all) return false;
            eval = v->latestEvaluation();
            return true;
          } catch (const Error&) {  // the scheduler is creating its state
            return false;
          }
        },
        180s);
    return eval;
  }

  /// The build of `job` in evaluation `eval`.
  scheduler::BuildRow buildOf(int64_t eval, const std::string& job) {
    auto v = scheduler::StateView::openIfExists(state_);
    for (auto& b : v->builds(eval))
      if (b.job == job) return b;
    ADD_FAILURE() << "no build of " << job << " in evaluation " << eval;
    return {};
  }

  /// Asks the farm to evaluate the jobset again; returns the evaluation
  /// once its builds finished.
  int64_t evaluateAgain(int64_t after) {
    auto eval = test::run({test::kilnBinary(), "jobset", "eval", "--project",
                           "rel", "release", "--state-dir", state_});
    EXPECT_EQ(eval.exitCode, 0) << eval.err;
    return finishedEvaluation(after);
  }

  /// Waits until the channel is at evaluation `eval`.
  bool channelAt(int64_t eval) {
    return test::pollUntil(
        [&] {
          try {
            return api(kChannel)["latest"]["eval"] == eval;
          } catch (const Error&) {
            return false;
          }
        },
        30s);
  }

  /// `kiln store gc --keep-evaluations 1 --json` on the farm's state.
  test::RunResult gcKeepingOne(bool dry) {
    std::vector<std::string> args = {
        test::kilnBinary(),   "store", "gc",    "--state-dir", state_,
        "--keep-evaluations", "1",     "--json"};
    if (dry) args.push_back("--dry-run");
    return test::run(args);
  }

  json api(const std::string& path) {
    return json::parse(test::httpGet(web_, "/api" + path));
  }

  /// The job history (app: failed, then built), the channel page and the
  /// jobset's advances in headless Chromium, saved under test-artifacts/
  /// release (nothing without chromium).
  void screenshotReleasePages() {
    if (test::CdpBrowser::findChromium().empty()) return;
    std::string shots = test::binaryDir() + "/test-artifacts/release";
    createDirs(shots);
    test::CdpBrowser browser(dir_.path() + "/chromium");
    auto page = browser.newPage(/*javascript=*/true);
    std::string base = "http://127.0.0.1:" + std::to_string(web_);
    page.navigate(base + "/jobset/rel/release/job/app");
    page.waitFor("document.getElementById('job-history') !== null", 30s);
    EXPECT_EQ(page.evaluate("document.querySelectorAll('#job-history svg')"
                            ".length")
                  .get<int>(),
              3);  // duration, output size, closure size
    page.screenshot(shots + "/job-history.png");
    page.navigate(base + kChannel);
    EXPECT_THAT(page.text(), HasSubstr("store-paths.xz"));
    // A folder jobset: no git-revision link (that URL answers 404).
    EXPECT_THAT(page.text(), ::testing::Not(HasSubstr("git-revision")));
    page.screenshot(shots + "/channel.png");
    page.navigate(base + "/jobset/rel/release");
    page.waitFor("document.getElementById('channel-advances') !== null", 30s);
    page.screenshot(shots + "/jobset-channel-advances.png");
  }

  void TearDown() override {
    if (serve_ && serve_->running()) serve_->stop();
  }

  TempDir dir_{"release-farm"};
  std::string collection_ = dir_.path() + "/release";
  std::string state_ = dir_.path() + "/state";
  int web_ = test::freeLoopbackPort();
  std::unique_ptr<test::KilnProcess> serve_;
};

// The path of `paths` ending in `suffix`.
std::string channelOutput(const std::vector<std::string>& paths,
                          const std::string& suffix) {
  for (auto& p : paths)
    if (p.ends_with(suffix)) return p;
  return "";
}

TEST_F(ReleaseFarm, AggregateGatesTheChannelWhichNixSubstitutes) {
  startServe();
  int64_t first = finishedEvaluation(0);
  ASSERT_GT(first, 0) << serve_->log();
  auto tested = buildOf(first, "tested");
  EXPECT_NE(tested.status, 0) << tested.error;
  EXPECT_NE(buildOf(first, "app").status, 0);
  EXPECT_EQ(buildOf(first, "docs").status, 0);

  json m = api("/build/" + std::to_string(tested.id));
  ASSERT_TRUE(m["aggregate"].is_object()) << m.dump(2);
  EXPECT_EQ(m["aggregate"]["failed"], json::array({"app"}));
  std::map<std::string, std::string> statuses;
  for (auto& c : m["aggregate"]["constituents"])
    statuses[c["job"]] = c["statusName"];
  EXPECT_EQ(statuses.size(), 3u) << m["aggregate"].dump(2);
  EXPECT_EQ(statuses["docs"], "success");
  EXPECT_EQ(statuses["lib"], "success");
  EXPECT_EQ(statuses["app"], "failed");
  std::string page = test::httpGet(web_, "/build/" + std::to_string(tested.id));
  EXPECT_THAT(page, HasSubstr("<h2>Constituents</h2>"));
  EXPECT_THAT(page, HasSubstr("Did not succeed: app"));
  // A job that is no aggregate has none.
  EXPECT_TRUE(
      api("/build/" + std::to_string(buildOf(first, "app").id))["aggregate"]
          .is_null());
  // The gate failed: the channel did not advance.
  EXPECT_THROW(test::httpGet(web_, kChannel), Error);
  EXPECT_TRUE(api("/jobset/rel/release")["channel"]["latest"].is_null());

  // Fixed: the next evaluation's aggregate succeeds and the channel
  // advances to it.
  deletePath(collection_ + "/broken");
  auto eval = test::run({test::kilnBinary(), "jobset", "eval", "--project",
                         "rel", "release", "--state-dir", state_});
  ASSERT_EQ(eval.exitCode, 0) << eval.err;
  int64_t second = finishedEvaluation(first);
  ASSERT_GT(second, first) << serve_->log();
  auto fixed = buildOf(second, "tested");
  EXPECT_EQ(fixed.status, 0) << fixed.error;
  EXPECT_NE(fixed.drvPath, tested.drvPath);  // it depends on the new app
  json channel;
  ASSERT_TRUE(test::pollUntil(
      [&] {
        try {
          channel = api(kChannel);
          return true;
        } catch (const Error&) {
          return false;
        }
      },
      30s));
  EXPECT_EQ(channel["latest"]["eval"], second);
  EXPECT_EQ(channel["latest"]["build"], fixed.id);
  EXPECT_EQ(channel["advances"].size(), 1u);
  EXPECT_THAT(readFile(state_ + "/serve/scheduler.log"),
              HasSubstr("advanced to evaluation " + std::to_string(second)));
  EXPECT_THAT(test::httpGet(web_, "/jobset/rel/release"),
              HasSubstr("id=\"channel-advances\""));

  screenshotReleasePages();

  // store-paths.xz lists the evaluation's outputs; the real nix
  // substitutes them from the binary-cache-url, signed by the farm's key.
  writeFile(dir_.path() + "/store-paths.xz",
            test::httpGet(web_, kChannel + "/store-paths.xz"));
  auto unxz = test::run({"xz", "-dc", dir_.path() + "/store-paths.xz"});
  ASSERT_EQ(unxz.exitCode, 0) << unxz.err;
  auto paths = test::nonEmptyLines(unxz.out);
  EXPECT_EQ(paths.size(), 4u) << unxz.out;  // lib, app, docs, tested
  std::string cache = test::httpGet(web_, kChannel + "/binary-cache-url");
  EXPECT_EQ(cache, "http://127.0.0.1\n");  // the Host the test sends
  if (!test::haveProgram("nix")) {
    EXPECT_EQ(serve_->stop(), 0) << serve_->log();
    GTEST_SKIP() << "nix is not installed: not substituted";
  }
  std::string key = readFile(state_ + "/serve/keys/cache.public");
  std::string target = "local?root=" + dir_.path() + "/nix";
  std::vector<std::string> copy = {"nix",
                                   "--extra-experimental-features",
                                   "nix-command",
                                   "copy",
                                   "--from",
                                   "http://127.0.0.1:" + std::to_string(web_),
                                   "--to",
                                   target,
                                   "--option",
                                   "trusted-public-keys",
                                   key};
  copy.insert(copy.end(), paths.begin(), paths.end());
  auto copied = test::run(copy, "", {"NIX_REMOTE="});
  ASSERT_EQ(copied.exitCode, 0) << copied.err;
  for (auto& p : paths) EXPECT_TRUE(pathExists(dir_.path() + "/nix" + p)) << p;
  EXPECT_THAT(readFile(dir_.path() + "/nix" + channelOutput(paths, "-tested") +
                       "/nix-support/hydra-aggregate-constituents"),
              HasSubstr("-app-1.0"));
  EXPECT_EQ(serve_->stop(), 0) << serve_->log();
}

TEST_F(ReleaseFarm, AClosureGrownPastTheLimitHoldsTheChannel) {
  deletePath(collection_ + "/broken");
  startServe();
  int64_t first = finishedEvaluation(0);
  ASSERT_GT(first, 0) << serve_->log();
  ASSERT_EQ(buildOf(first, "tested").status, 0);
  ASSERT_TRUE(channelAt(first)) << serve_->log();

  writeFile(collection_ + "/bloat", "");
  int64_t second = evaluateAgain(first);
  ASSERT_GT(second, first) << serve_->log();
  EXPECT_EQ(buildOf(second, "tested").status, 0);  // the gate passed...
  json m;
  ASSERT_TRUE(test::pollUntil(
      [&] {
        m = api("/eval/" + std::to_string(second));
        return !m["regressions"].empty();
      },
      30s))
      << m.dump(2);
  // ...but docs' closure grew a hundredfold: held at the first evaluation.
  ASSERT_EQ(m["regressions"].size(), 1u) << m["regressions"].dump(2);
  auto& r = m["regressions"][0];
  EXPECT_EQ(r["job"], "docs");
  EXPECT_EQ(r["kind"], "closure");
  EXPECT_EQ(r["baseEval"], first);
  EXPECT_GT(r["after"].get<int64_t>(), 50 * r["before"].get<int64_t>());
  json channel = api(kChannel);
  EXPECT_EQ(channel["latest"]["eval"], first);
  EXPECT_EQ(channel["advances"].size(), 1u);
  EXPECT_THAT(test::httpGet(web_, "/eval/" + std::to_string(second)),
              HasSubstr("id=\"regressed\""));
  EXPECT_THAT(readFile(state_ + "/serve/scheduler.log"),
              HasSubstr("evaluation " + std::to_string(second) +
                        " of jobset 1 regressed"));
  EXPECT_EQ(serve_->stop(), 0) << serve_->log();
}

// Three evaluations with three sources: the first (gate broken), the
// second (fixed, the channel's), the third (broken again, the latest).
// Keeping one evaluation collects the first's sources only; the dry run
// lists what the real run deletes; the channel still serves its sources.
TEST_F(ReleaseFarm, KeepingOneEvaluationCollectsTheOlderSources) {
  startServe();
  int64_t first = finishedEvaluation(0);
  ASSERT_GT(first, 0) << serve_->log();
  deletePath(collection_ + "/broken");
  int64_t second = evaluateAgain(first);
  ASSERT_GT(second, first) << serve_->log();
  ASSERT_TRUE(channelAt(second)) << serve_->log();
  writeFile(collection_ + "/broken", "");
  writeFile(collection_ + "/note", "sources unlike the first's\n");
  int64_t third = evaluateAgain(second);
  ASSERT_GT(third, second) << serve_->log();
  EXPECT_NE(buildOf(third, "tested").status, 0);
  ASSERT_TRUE(channelAt(second));
  // Stopped: its temporary roots end, and no evaluation starts meanwhile.
  ASSERT_EQ(serve_->stop(), 0) << serve_->log();

  std::map<int64_t, std::string> sources;
  {
    scheduler::StateDb db(scheduler::DatabaseSpec::inStateDir(state_),
                          scheduler::StateDb::Existing{});
    for (int64_t e : {first, second, third})
      sources[e] = scheduler::evalSources(db, e);
  }
  std::set<std::string> distinct;
  for (auto& [e, path] : sources) distinct.insert(path);
  ASSERT_EQ(distinct.size(), 3u);
  auto valid = [&](int64_t e) {
    store::LocalStore store(state_);
    return store.isValid(store.parsePath(sources[e]));
  };
  for (int64_t e : {first, second, third}) ASSERT_TRUE(valid(e)) << e;

  auto dry = gcKeepingOne(true);
  ASSERT_EQ(dry.exitCode, 0) << dry.err;
  EXPECT_THAT(dry.err, HasSubstr("2 rooted, 0 roots would be restored, "
                                 "1 roots would be dropped"));
  auto deleted = [](const std::string& out) {
    auto paths = json::parse(out)["deleted"].get<std::vector<std::string>>();
    return std::set<std::string>(paths.begin(), paths.end());
  };
  auto planned = deleted(dry.out);
  EXPECT_TRUE(planned.count(sources[first]));
  for (int64_t e : {first, second, third}) EXPECT_TRUE(valid(e)) << e;
  auto real = gcKeepingOne(false);
  ASSERT_EQ(real.exitCode, 0) << real.err;
  EXPECT_THAT(real.err,
              HasSubstr("2 rooted, 0 roots restored, 1 roots dropped"));
  EXPECT_EQ(deleted(real.out), planned);
  EXPECT_FALSE(valid(first));
  EXPECT_TRUE(valid(second));  // the channel's
  EXPECT_TRUE(valid(third));   // the latest

  startServe();
  ASSERT_TRUE(channelAt(second)) << serve_->log();
  writeFile(dir_.path() + "/nixexprs.tar.xz",
            test::httpGet(web_, kChannel + "/nixexprs.tar.xz"));
  auto tar = test::run({"tar", "-tJf", dir_.path() + "/nixexprs.tar.xz"});
  ASSERT_EQ(tar.exitCode, 0) << tar.err;
  EXPECT_THAT(tar.out, HasSubstr("release/default.nix"));
  EXPECT_THAT(tar.out, ::testing::Not(HasSubstr("release/note")));
  EXPECT_EQ(serve_->stop(), 0) << serve_->log();
}

}  // namespace
}  // namespace kiln
