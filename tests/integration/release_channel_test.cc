// Release engineering through a real farm (`kiln serve --config`, one local
// worker, no sandbox) on tests/data/release, a collection gated by a
// `tested` aggregate job: while a constituent fails, the aggregate fails
// naming it (build page and API) and the channel stays where it was; once
// fixed, the aggregate succeeds, the channel advances to that evaluation
// and the real `nix` substitutes the channel's store-paths.xz from the
// farm's binary cache.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

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

// The farm's config: one local worker without sandbox, project "rel" with
// jobset "release" on `collection`, evaluated on demand only.
std::string configText(const std::string& dir, const std::string& collection,
                       int port, int web) {
  return "state_dir = \"" + dir + "/state\"\n[scheduler]\n" +
         "listen = \"tcp://127.0.0.1:" + std::to_string(port) +
         "\"\nweb_listen = \"127.0.0.1:" + std::to_string(web) +
         "\"\nmetrics_port = -1\n[local_workers]\ncount = 1\n" +
         "sandbox = \"none\"\n[[project]]\nname = \"rel\"\n" +
         "[[project.jobset]]\nname = \"release\"\npath = \"" + collection +
         "\"\ncheck_interval = 0\n";
}

class ReleaseFarm : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
    std::filesystem::copy(test::sourceDir() + "/tests/data/release",
                          collection_);
    writeFile(collection_ + "/broken", "");
    writeFile(dir_.path() + "/kiln.toml",
              configText(dir_.path(), collection_, test::freeLoopbackPort(),
                         web_));
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
          auto v = scheduler::StateView::openIfExists(state_);
          if (!v || v->latestEvaluation() <= after) return false;
          auto c = v->buildCounts(v->latestEvaluation());
          if (c.all == 0 || c.finished != c.all) return false;
          eval = v->latestEvaluation();
          return true;
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

  json api(const std::string& path) {
    return json::parse(test::httpGet(web_, "/api" + path));
  }

  TempDir dir_{"release-farm"};
  std::string collection_ = dir_.path() + "/release";
  std::string state_ = dir_.path() + "/state";
  int web_ = test::freeLoopbackPort();
  std::unique_ptr<test::KilnProcess> serve_;
};

TEST_F(ReleaseFarm, AggregateFailsNamingItsFailedConstituent) {
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
  std::string page =
      test::httpGet(web_, "/build/" + std::to_string(tested.id));
  EXPECT_THAT(page, HasSubstr("<h2>Constituents</h2>"));
  EXPECT_THAT(page, HasSubstr("Did not succeed: app"));
  // A job that is no aggregate has none.
  EXPECT_TRUE(api("/build/" + std::to_string(buildOf(first, "app").id))
                  ["aggregate"]
                      .is_null());
  EXPECT_EQ(serve_->stop(), 0) << serve_->log();
}

}  // namespace
}  // namespace kiln
