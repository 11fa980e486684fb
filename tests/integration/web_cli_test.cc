// `kiln scheduler --web-listen`: the scheduler process serves the web front
// end on the given address, prints its URL, answers unknown pages with a
// clear 404 and /metrics in a text promtool accepts, and refuses a
// malformed address before starting.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln_process.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

TEST(WebCli, SchedulerServesTheWebFrontEnd) {
  TempDir dir;
  int port = test::freeLoopbackPort();
  std::string url = "http://127.0.0.1:" + std::to_string(port);
  test::KilnProcess sched(
      {"scheduler", "--state-dir", dir.path() + "/state", "--listen",
       "tcp://127.0.0.1:*", "--insecure-plaintext", "--web-listen",
       "127.0.0.1:" + std::to_string(port)},
      dir.path() + "/sched.log");
  // Not "listening": the service logs that before the web is up.
  ASSERT_TRUE(sched.waitForLog(" web " + url, 30s)) << sched.log();
  try {
    test::httpGet(port, "/no/such/page");
    ADD_FAILURE() << "a page that does not exist answered 200";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("404 Not Found"));
  }
  // /metrics: the farm's families and the request just answered, in a
  // text promtool accepts.
  std::string metrics = test::httpGet(port, "/metrics");
  EXPECT_THAT(metrics, HasSubstr("kiln_workers 0"));
  EXPECT_THAT(metrics, HasSubstr("route=\"unmatched\",status=\"404\"} 1"));
  if (test::haveProgram("promtool")) {
    auto check = test::run({"promtool", "check", "metrics"}, metrics);
    EXPECT_EQ(check.exitCode, 0) << check.out << check.err;
  }
  EXPECT_EQ(sched.stop(30s), 0) << sched.log();
}

TEST(WebCli, MalformedWebAddressIsRefused) {
  TempDir dir;
  auto r = test::run({test::kilnBinary(), "scheduler", "--state-dir",
                      dir.path() + "/state", "--listen", "tcp://127.0.0.1:*",
                      "--insecure-plaintext", "--web-listen", "nowhere"});
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.err, HasSubstr("web address 'nowhere' must be HOST:PORT"));
}

}  // namespace
}  // namespace kiln
