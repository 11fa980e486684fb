// The scheduler's Prometheus families (metrics.h): the per-system queue
// gauge is bounded, whatever systems a jobset's derivations name.
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <map>
#include <string>

#include "kiln/scheduler/metrics.h"

namespace kiln::scheduler {
namespace {

// The value of each kiln_queue_steps series, by its system label.
std::map<std::string, double> queueSeries(prometheus::Registry& registry) {
  std::map<std::string, double> out;
  for (auto& family : registry.Collect()) {
    if (family.name != "kiln_queue_steps") continue;
    for (auto& m : family.metric)
      for (auto& l : m.label)
        if (l.name == "system") out[l.value] = m.gauge.value;
  }
  return out;
}

TEST(ServiceMetrics, QueueSeriesAreBoundedAndDroppedWhenEmpty) {
  prometheus::Registry registry;
  ServiceMetrics metrics(registry);
  SchedulerMetrics m;
  m.queuedBySystem["x86_64-linux"] = 2;
  m.queuedBySystem["aarch64-darwin"] = 1;  // well known, no worker for it
  m.queuedBySystem["my-board-os"] = 4;     // a worker announces it
  m.workerSystems = {"x86_64-linux", "my-board-os"};
  for (int i = 0; i < 1000; i++)  // a hostile jobset's systems
    m.queuedBySystem["evil-" + std::to_string(i)] = 1;
  m.queuedBySystem["idle-system"] = 0;
  metrics.update(m);
  auto series = queueSeries(registry);
  EXPECT_EQ(series.size(), 4u);
  EXPECT_EQ(series["x86_64-linux"], 2);
  EXPECT_EQ(series["aarch64-darwin"], 1);
  EXPECT_EQ(series["my-board-os"], 4);
  EXPECT_EQ(series["other"], 1000);

  // The hostile steps are gone, and so are their series.
  for (int i = 0; i < 1000; i++)
    m.queuedBySystem.erase("evil-" + std::to_string(i));
  m.queuedBySystem["x86_64-linux"] = 0;
  metrics.update(m);
  series = queueSeries(registry);
  EXPECT_EQ(series.size(), 2u);
  EXPECT_EQ(series["aarch64-darwin"], 1);
  EXPECT_EQ(series["my-board-os"], 4);
}

TEST(ServiceMetrics, StepDurationsOfUnknownSystemsShareOneSeries) {
  prometheus::Registry registry;
  ServiceMetrics metrics(registry);
  for (int i = 0; i < 500; i++)
    metrics.observeStepDuration("evil-" + std::to_string(i), 1.0);
  metrics.observeStepDuration("x86_64-linux", 1.0);
  size_t series = 0;
  for (auto& family : registry.Collect())
    if (family.name == "kiln_step_duration_seconds")
      series = family.metric.size();
  EXPECT_EQ(series, 2u);  // "other" and x86_64-linux
}

}  // namespace
}  // namespace kiln::scheduler
