// Plugin counters (kiln_host_services.metric_add): kept per plugin, served
// as Prometheus families labelled with the plugin's kind and name in a text
// promtool accepts; malformed names, negative deltas and too many series
// are dropped, never exported.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <cmath>

#include "kiln/plugin_host/host_services.h"
#include "test_support.h"

namespace kiln::plugins {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string metricsText() {
  return prometheus::TextSerializer().Serialize(pluginMetrics()->Collect());
}

TEST(PluginMetrics, CountersAreLabelledWithThePlugin) {
  HostServices a(KILN_PLUGIN_EVALUATOR, "metrics-a", {});
  HostServices b(KILN_PLUGIN_NOTIFIER, "metrics-b", {});
  auto add = [](HostServices& h, const char* name, double d) {
    h.table()->metric_add(h.table()->ctx, name, d);
  };
  add(a, "widgets_total", 2);
  add(a, "widgets_total", 3);
  add(b, "widgets", 1);  // "_total" is added
  add(a, "bad name", 1);
  add(a, "9lives", 1);
  add(a, "widgets_total", -4);
  add(a, "widgets_total", std::nan(""));
  EXPECT_EQ(pluginCounter("evaluator", "metrics-a", "widgets_total"), 5.0);
  EXPECT_EQ(pluginCounter("notifier", "metrics-b", "widgets"), 1.0);
  std::string text = metricsText();
  EXPECT_THAT(text, HasSubstr("# TYPE kiln_plugin_widgets_total counter"));
  EXPECT_THAT(text,
              HasSubstr("kiln_plugin_widgets_total{kind=\"evaluator\",plugin="
                        "\"metrics-a\"} 5"));
  EXPECT_THAT(text,
              HasSubstr("kiln_plugin_widgets_total{kind=\"notifier\",plugin="
                        "\"metrics-b\"} 1"));
  EXPECT_THAT(text, Not(HasSubstr("bad")));
  EXPECT_THAT(text, Not(HasSubstr("9lives")));
  if (test::haveProgram("promtool")) {
    auto check = test::run({"promtool", "check", "metrics"}, text);
    EXPECT_EQ(check.exitCode, 0) << check.out << check.err << text;
  }
}

TEST(PluginMetrics, APluginCannotCreateUnboundedSeries) {
  HostServices h(KILN_PLUGIN_SANDBOX, "metrics-many", {});
  for (int i = 0; i < 5000; i++)
    h.table()->metric_add(h.table()->ctx, ("c" + std::to_string(i)).c_str(), 1);
  EXPECT_EQ(pluginCounter("sandbox", "metrics-many", "c0"), 1.0);
  EXPECT_EQ(pluginCounter("sandbox", "metrics-many", "c255"), 1.0);
  EXPECT_EQ(pluginCounter("sandbox", "metrics-many", "c256"), 0.0);
  EXPECT_EQ(pluginCounter("sandbox", "metrics-many", "c4999"), 0.0);
  size_t series = 0;
  for (auto& f : pluginMetrics()->Collect()) series += f.metric.size();
  EXPECT_LE(series, 4096u);
}

// The bound is per plugin first: one plugin's runaway counter names leave
// room for every other plugin's (and for the next tests in this process).
TEST(PluginMetrics, OnePluginsTooManyCountersLeaveRoomForOthers) {
  for (int p = 0; p < 4; p++) {
    HostServices h(KILN_PLUGIN_SANDBOX, "metrics-runaway" + std::to_string(p),
                   {});
    for (int i = 0; i < 1000; i++)
      h.table()->metric_add(h.table()->ctx,
                            ("r" + std::to_string(i)).c_str(), 1);
  }
  HostServices quiet(KILN_PLUGIN_NOTIFIER, "metrics-quiet", {});
  quiet.table()->metric_add(quiet.table()->ctx, "sent", 2);
  EXPECT_EQ(pluginCounter("notifier", "metrics-quiet", "sent"), 2.0);
  EXPECT_EQ(pluginCounter("sandbox", "metrics-runaway3", "r255"), 1.0);
  EXPECT_EQ(pluginCounter("sandbox", "metrics-runaway3", "r256"), 0.0);
}

}  // namespace
}  // namespace kiln::plugins
