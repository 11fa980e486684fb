// `kiln serve` runs the main job: a scheduler, local workers with private
// stores, a jobset for the collection and its evaluation; it reports the
// builds finishing, answers on /metrics, and Ctrl-C stops everything.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include "farm.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

TEST(Serve, BuildsTheExampleCollectionAndStopsCleanlyOnCtrlC) {
  std::string why;
  if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
  if (!test::haveProgram("nix-instantiate")) GTEST_SKIP() << "no Nix";
  TempDir dir;
  std::string state = dir.path() + "/state";
  int port = test::freeLoopbackPort(), metrics = test::freeLoopbackPort();
  test::KilnProcess serve(
      {"serve", "--state-dir", state, "--workers", "2", "--listen",
       "tcp://127.0.0.1:" + std::to_string(port), "--metrics-port",
       std::to_string(metrics), "--check-interval", "0",
       std::string(KILN_SOURCE_DIR) + "/examples/hello"},
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
  auto v = test::run({test::kilnBinary(), "store", "verify", "--state-dir",
                      state, "--json"});
  EXPECT_EQ(v.exitCode, 0) << v.out << v.err;
}

}  // namespace
}  // namespace kiln
