// `/metrics`: the shared registry with HTTP requests by route and the
// central store's size, in a format `promtool check metrics` accepts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/counter.h>

#include "http_client.h"
#include "kiln/common/file.h"
#include "kiln/store/local_store.h"
#include "kiln/web/routes.h"
#include "test_support.h"

namespace kiln::web {
namespace {

using ::testing::HasSubstr;

class MetricsTest : public ::testing::Test {
 protected:
  // A front end on a state directory holding a store with one text path,
  // and a "farm" counter standing for the scheduler's families.
  void start() {
    store::LocalStore store(dir.path());
    store.addText("hello.txt", "hello", {});
    WebContext ctx;
    ctx.stateDir = dir.path();
    ctx.metrics = registry;
    prometheus::BuildCounter()
        .Name("kiln_dispatches_total")
        .Help("Steps dispatched")
        .Register(*registry)
        .Add({})
        .Increment(3);
    WebServerConfig cfg;
    cfg.listen = "127.0.0.1:0";
    web = std::make_unique<WebFrontend>(cfg, std::move(ctx));
  }
  std::string scrape() {
    auto a = test::webGet(web->port(), "/metrics");
    EXPECT_TRUE(a);
    if (!a) return "";
    EXPECT_EQ(a->status, 200);
    EXPECT_THAT(a->header("content-type"), HasSubstr("version=0.0.4"));
    return a->body;
  }

  TempDir dir;
  std::shared_ptr<prometheus::Registry> registry =
      std::make_shared<prometheus::Registry>();
  std::unique_ptr<WebFrontend> web;
};

TEST_F(MetricsTest, FarmStoreAndRequestsInOneRegistry) {
  start();
  test::webGet(web->port(), "/no/such/page");
  test::exchange(web->port(),
                 "BREW /metrics HTTP/1.1\r\nHost: localhost\r\n"
                 "Connection: close\r\n\r\n");
  scrape();
  std::string text = scrape();
  EXPECT_THAT(text, HasSubstr("kiln_dispatches_total 3"));
  EXPECT_THAT(text, HasSubstr("kiln_store_valid_paths 1"));
  EXPECT_THAT(text, HasSubstr("kiln_store_nar_bytes 120"));
  EXPECT_THAT(text, HasSubstr("kiln_http_requests_total{method=\"GET\","
                              "route=\"/metrics\",status=\"200\"} 1"));
  EXPECT_THAT(text, HasSubstr("kiln_http_requests_total{method=\"GET\","
                              "route=\"unmatched\",status=\"404\"} 1"));
  EXPECT_THAT(text, HasSubstr("kiln_http_requests_total{method=\"other\","
                              "route=\"unmatched\",status=\"405\"} 1"));
  EXPECT_THAT(text, HasSubstr("kiln_http_request_duration_seconds_count{"
                              "route=\"/metrics\"} 1"));
}

TEST_F(MetricsTest, PromtoolAcceptsTheText) {
  if (!test::haveProgram("promtool"))
    GTEST_SKIP() << "no promtool (Debian's prometheus; install-deps.sh)";
  start();
  test::webGet(web->port(), "/nowhere");
  auto r = test::run({"promtool", "check", "metrics"}, scrape());
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
}

}  // namespace
}  // namespace kiln::web
