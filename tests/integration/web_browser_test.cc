// The dashboard in a real browser (issue 13, "Must show"): headless
// Chromium, driven over the DevTools protocol, against a real scheduler,
// worker and web front end on loopback. It loads the overview, opens a
// running build and sees new log lines arrive without a reload, cancels the
// build with an API token through the page's form and sees the status
// change, compares two evaluations, and reads every page again with
// JavaScript off. A screenshot of each page is kept under
// <build>/test-artifacts/web-browser/.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "cdp_browser.h"
#include "farm.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

// v1: `broken` fails; v2 fixes it and adds `slow`, which prints a line every
// 0.1 s for at most five minutes (the test cancels it long before).
constexpr const char* kCollectionV1 = R"({
  hello = mk "hello" "echo hi > $out" [];
  broken = mk "broken" "echo broken; exit 1" [];
})";
constexpr const char* kCollectionV2 = R"({
  hello = mk "hello" "echo hi > $out" [];
  broken = mk "broken" "echo fixed > $out" [];
  slow = mk "slow" "i=0; while [ $i -lt 3000 ]; do echo tick-$i; i=$((i+1)); sleep 0.1; done; echo > $out" [];
})";

/// Number of "tick-N" lines in the build page's log element.
constexpr const char* kTickCount =
    "(document.getElementById('log').textContent.match(/tick-\\d+/g) || [])"
    ".length";

class WebBrowser : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why; !test::Farm::canRun(&why)) GTEST_SKIP() << why;
    if (test::CdpBrowser::findChromium().empty())
      GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh "
                      "installs Debian's chromium)";
    artifacts_ = test::binaryDir() + "/test-artifacts/web-browser";
    createDirs(artifacts_);
  }

  std::string shot(const std::string& name) const {
    return artifacts_ + "/" + name + ".png";
  }

  std::string artifacts_;
};

TEST_F(WebBrowser, LiveLogCancelCompareAndPagesWithoutJavaScript) {
  int webPort = test::freeLoopbackPort();
  std::string web = "http://127.0.0.1:" + std::to_string(webPort);
  test::FarmOptions options;
  options.schedulerArgs = {"--web-listen", "127.0.0.1:" + std::to_string(webPort)};
  test::Farm farm(options);
  farm.startScheduler();
  ASSERT_TRUE(farm.scheduler().waitForLog(" web " + web, 30s))
      << farm.scheduler().log();
  farm.addWorker(test::WorkerOptions::withSlots(2));
  ASSERT_TRUE(farm.waitForWorkers(1, 60s));

  std::string coll = farm.writeCollection("coll", kCollectionV1);
  farm.createJobset("demo", "main", coll);
  int64_t eval1 = farm.evaluate("demo", "main");
  ASSERT_TRUE(farm.waitForBuilds(eval1, 120s));
  farm.writeCollection("coll", kCollectionV2);
  int64_t eval2 = farm.evaluate("demo", "main");
  int64_t slow = 0;
  for (const auto& b : farm.builds(eval2))
    if (b.job == "slow") slow = b.id;
  ASSERT_NE(slow, 0);
  std::string token = farm.kiln({"token", "create", "--scope", "operate"}).out;
  token = token.substr(0, token.find('\n'));
  ASSERT_THAT(token, HasSubstr("kiln_"));

  test::CdpBrowser browser(farm.dir() + "/chromium");
  auto page = browser.newPage(/*javascript=*/true);

  // The overview, once the slow build's step runs.
  ASSERT_TRUE(test::pollUntil(
      [&] {
        return test::httpGet(webPort, "/api/build/" + std::to_string(slow))
                   .find("tick-") != std::string::npos;
      },
      120s))
      << "the slow build printed nothing";
  // The scheduler publishes its snapshot when the web asks for one (at
  // most every kSnapshotInterval): the first load may show the one before.
  std::string overview;
  EXPECT_TRUE(test::pollUntil(
      [&] {
        page.navigate(web + "/");
        overview = page.text();
        return overview.find("worker-0") != std::string::npos &&
               overview.find("slow") != std::string::npos;
      },
      60s));
  EXPECT_THAT(overview, HasSubstr("Queue per system"));
  EXPECT_THAT(overview, HasSubstr("Running steps"));
  EXPECT_THAT(overview, HasSubstr("slow"));
  EXPECT_THAT(overview, HasSubstr("worker-0"));
  page.screenshot(shot("overview"));

  // The running build: lines arrive through the live log, no reload (a
  // marker set on the window survives).
  std::string buildUrl = web + "/build/" + std::to_string(slow);
  page.navigate(buildUrl);
  page.evaluate("window.kilnMarker = 42");
  int before = page.evaluate(kTickCount).get<int>();
  EXPECT_TRUE(page.waitFor(std::string(kTickCount) + " >= " +
                               std::to_string(before + 5) +
                               " && window.kilnMarker === 42",
                           60s))
      << "no new log lines without a reload; log now:\n"
      << page.evaluate("document.getElementById('log').textContent");
  page.screenshot(shot("build-running"));

  // Cancel through the page's form with the token; the form posts, is
  // redirected back, and the page shows the new status (rendered, or set by
  // the live log's end event).
  page.navigateBy(
      "(() => { const f = document.querySelector("
      "'form[action$=\"/cancel\"]'); f.querySelector('input[name=token]')"
      ".value = '" + token + "'; f.querySelector('button').click(); "
      "return true; })()");
  EXPECT_TRUE(page.waitFor(
      "document.getElementById('status').textContent.includes('Cancelled')",
      60s))
      << page.text();
  EXPECT_EQ(page.evaluate("location.pathname").get<std::string>(),
            "/build/" + std::to_string(slow));
  page.screenshot(shot("build-cancelled"));
  ASSERT_TRUE(farm.waitForBuilds(eval2, 60s));
  for (const auto& b : farm.builds(eval2)) {
    if (b.id != slow) continue;
    EXPECT_EQ(b.status, 4) << "cancelled is Hydra's 4";
  }

  // The comparison of the two evaluations.
  std::string cmp = web + "/eval/" + std::to_string(eval2) +
                    "/compare?base=" + std::to_string(eval1);
  page.navigate(cmp + "&kind=newly-succeeding");
  EXPECT_THAT(page.text(), HasSubstr("broken"));
  EXPECT_THAT(page.text(), Not(HasSubstr("hello")));
  page.screenshot(shot("compare-newly-succeeding"));
  page.navigate(cmp + "&kind=new");
  EXPECT_THAT(page.text(), HasSubstr("slow"));
  page.screenshot(shot("compare-new"));

  // Every other page, with a screenshot.
  std::vector<std::pair<std::string, std::string>> pages = {
      {"projects", "/projects"},
      {"jobset", "/jobset/demo/main"},
      {"eval", "/eval/" + std::to_string(eval2)},
      {"job", "/jobset/demo/main/job/broken"},
      {"queue", "/queue"},
      {"workers", "/workers"},
      {"search", "/search?q=bro"}};
  for (const auto& [name, path] : pages) {
    page.navigate(web + path);
    EXPECT_THAT(page.text(), Not(HasSubstr("Not Found"))) << path;
    page.screenshot(shot(name));
  }

  // Without JavaScript: the same content is in the served document.
  auto nojs = browser.newPage(/*javascript=*/false);
  nojs.navigate(buildUrl);
  std::string html = nojs.html();
  EXPECT_THAT(html, HasSubstr("Cancelled"));
  EXPECT_TRUE(std::regex_search(html, std::regex("tick-[0-9]+")));
  EXPECT_THAT(html, HasSubstr("/build/" + std::to_string(slow) + "/log"));
  nojs.screenshot(shot("nojs-build"));
  nojs.navigate(web + "/");
  EXPECT_THAT(nojs.html(), HasSubstr("Recent evaluations"));
  nojs.navigate(cmp + "&kind=newly-succeeding");
  EXPECT_THAT(nojs.html(), HasSubstr("broken"));
  nojs.navigate(web + "/eval/" + std::to_string(eval1) + "?state=failed");
  EXPECT_THAT(nojs.html(), HasSubstr("broken"));
  nojs.navigate(web + "/jobset/demo/main");
  EXPECT_THAT(nojs.html(), HasSubstr("slow"));
  nojs.screenshot(shot("nojs-jobset"));
}

}  // namespace
}  // namespace kiln
