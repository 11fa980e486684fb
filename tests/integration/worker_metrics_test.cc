// `kiln worker --metrics-listen`: the counters of the plugins a worker
// loads (sandbox, platform) are served on the worker's own /metrics,
// labelled with the plugin, in a text promtool accepts; the scheduler's
// /metrics does not have them (they live in the worker's process).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "farm.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

TEST(WorkerMetrics, SandboxAndPlatformCountersAreOnTheWorkersMetrics) {
  std::string why;
  if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
  test::Farm farm;
  auto coll = farm.writeCollection(
      "coll", "{ a = mk \"a\" \"echo a > $out\" [];\n"
              "  b = mk \"b\" \"echo b > $out\" []; }");
  farm.startScheduler();
  int port = test::freeLoopbackPort();
  test::WorkerOptions o;
  o.name = "metered";
  o.extraArgs = {"--metrics-listen", "127.0.0.1:" + std::to_string(port)};
  farm.addWorker(o);
  ASSERT_TRUE(farm.waitForWorkers(1, 60s)) << farm.worker(0).log();
  // The farm's workers run the `none` sandbox, which says so loudly.
  EXPECT_THAT(farm.worker(0).log(),
              HasSubstr("WARNING: the 'none' sandbox does not isolate builds"));
  EXPECT_THAT(farm.worker(0).log(),
              HasSubstr("worker metrics http://127.0.0.1:" +
                        std::to_string(port) + "/metrics"));
  // Before any build: the worker's own family, no plugin sample yet.
  std::string before = test::httpGet(port, "/metrics");
  EXPECT_THAT(before, HasSubstr("kiln_worker_info{slots=\"1\","
                                "version=\"" KILN_PROJECT_VERSION
                                "\",worker=\"metered\"} 1"));
  EXPECT_THAT(before, Not(HasSubstr("kiln_plugin_builds_total")));

  farm.createJobset("p", "j", coll);
  int64_t eval = farm.evaluate("p", "j");
  ASSERT_TRUE(farm.waitForBuilds(eval, 120s)) << farm.worker(0).log();
  for (auto& b : farm.builds(eval)) EXPECT_EQ(b.status, 0) << b.job;
  std::string m = test::httpGet(port, "/metrics");
  EXPECT_THAT(m, HasSubstr("# TYPE kiln_plugin_builds_total counter"));
  EXPECT_THAT(m, HasSubstr("kiln_plugin_builds_total{kind=\"sandbox\","
                           "plugin=\"none\"} 2"));
  EXPECT_THAT(m, HasSubstr("kiln_plugin_builds_total{kind=\"platform\","
                           "plugin=\"native\"} 2"));
  EXPECT_THAT(m, HasSubstr("kiln_http_requests_total{method=\"GET\","
                           "route=\"/metrics\",status=\"200\"} 1"));
  EXPECT_THAT(m, Not(HasSubstr("kiln_store_")));  // no central store here
  EXPECT_THAT(farm.metricsText(), Not(HasSubstr("kind=\"sandbox\"")));
  ASSERT_TRUE(test::haveProgram("promtool"))
      << "promtool (Debian's prometheus) checks the text: "
         "scripts/install-deps.sh";
  auto check = test::run({"promtool", "check", "metrics"}, m);
  EXPECT_EQ(check.exitCode, 0) << check.out << check.err << m;
  EXPECT_EQ(farm.stopWorker(0), 0);
  EXPECT_EQ(farm.stopScheduler(), 0);
}

// A malformed address is refused before the worker connects.
TEST(WorkerMetrics, AMalformedListenAddressIsRefused) {
  TempDir dir;
  auto r = test::run({test::kilnBinary(), "worker", "--connect",
                      "tcp://127.0.0.1:1", "--insecure-plaintext",
                      "--state-dir", dir.path() + "/w", "--sandbox", "none",
                      "--metrics-listen", "nowhere"});
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("nowhere"));
}

}  // namespace
}  // namespace kiln
