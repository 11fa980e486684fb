#include "kiln/plugin_host/host_services.h"

#include <prometheus/metric_family.h>

#include <cctype>
#include <cstring>
#include <mutex>
#include <set>
#include <tuple>

#include "kiln/common/logging.h"
#include "kiln/plugin_host/registry.h"

namespace kiln::plugins {
namespace {

/// Bounds on what plugins may create: counter names, series of one plugin
/// (so that one plugin's runaway names cannot take every other plugin's
/// room) and series of the process.
constexpr size_t kMaxCounterName = 64;
constexpr size_t kMaxSeriesPerPlugin = 256;
constexpr size_t kMaxSeries = 4096;

/// (counter family name, kind, plugin) → value.
using CounterKey = std::tuple<std::string, std::string, std::string>;

struct Counters {
  std::mutex mu;
  std::map<CounterKey, double> values;
  std::map<std::pair<std::string, std::string>, size_t> perPlugin;  // series
  std::set<std::string> warned;  // one warning per bad name
};

Counters& counters() {
  static Counters c;
  return c;
}

/// `kiln_plugin_<name>[_total]`, or "" when `name` is not a metric name
/// (letters, digits, '_', not starting with a digit, at most 64 bytes).
std::string familyName(const std::string& name) {
  if (name.empty() || name.size() > kMaxCounterName ||
      std::isdigit(static_cast<unsigned char>(name[0])))
    return "";
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return "";
  std::string full = "kiln_plugin_" + name;
  return full.ends_with("_total") ? full : full + "_total";
}

class PluginCollectable final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    auto& c = counters();
    std::lock_guard lock(c.mu);
    std::vector<prometheus::MetricFamily> out;
    for (auto& [key, value] : c.values) {
      auto& [family, kind, plugin] = key;
      if (out.empty() || out.back().name != family) {
        out.push_back({family,
                       "Counter a kiln plugin keeps (metric_add), by plugin",
                       prometheus::MetricType::Counter,
                       {}});
      }
      prometheus::ClientMetric m;
      m.label = {{"kind", kind}, {"plugin", plugin}};
      m.counter.value = value;
      out.back().metric.push_back(std::move(m));
    }
    return out;
  }
};

}  // namespace

HostServices::HostServices(kiln_plugin_kind kind, std::string name,
                           PluginConfig config)
    : kind_(kindName(kind)),
      name_(std::move(name)),
      label_(kind_ + " " + name_),
      config_(std::move(config)) {
  std::memset(&table_, 0, sizeof table_);
  table_.size = sizeof table_;
  table_.ctx = this;
  table_.log = &HostServices::log;
  table_.metric_add = &HostServices::metricAdd;
  table_.config_get = &HostServices::configGet;
}

void HostServices::log(void* ctx, kiln_log_level level, const char* message) {
  auto* self = static_cast<HostServices*>(ctx);
  std::string line = self->label_ + ": " + (message ? message : "");
  switch (level) {
    case KILN_LOG_DEBUG:
      logDebug(line);
      break;
    case KILN_LOG_INFO:
      logInfo(line);
      break;
    case KILN_LOG_WARN:
      logWarn(line);
      break;
    default:
      logError(line);
  }
}

// A counter only goes up: a negative or non-finite delta, a malformed
// name or a series beyond the bound is dropped (warned about once).
void HostServices::metricAdd(void* ctx, const char* name, double delta) {
  auto* self = static_cast<HostServices*>(ctx);
  std::string n = name ? name : "";
  std::string family = familyName(n);
  auto& c = counters();
  std::lock_guard lock(c.mu);
  CounterKey key{family, self->kind_, self->name_};
  bool known = c.values.count(key) > 0;
  size_t& mine = c.perPlugin[{self->kind_, self->name_}];
  const char* why =
      family.empty()                   ? "is not a metric name"
      : !(delta >= 0) || delta > 1e300 ? "got a negative or non-finite delta"
      : !known && (mine >= kMaxSeriesPerPlugin || c.values.size() >= kMaxSeries)
          ? "is one counter too many"
          : nullptr;
  if (why) {
    if (c.warned.insert(self->label_ + "/" + n).second)
      logWarn(self->label_ + ": counter '" + n.substr(0, 80) + "' " + why +
              " (dropped)");
    return;
  }
  if (!known) ++mine;
  c.values[key] += delta;
}

int64_t HostServices::configGet(void* ctx, const char* key, char* buf,
                                size_t size) {
  auto* self = static_cast<HostServices*>(ctx);
  auto it = self->config_.find(key ? key : "");
  if (it == self->config_.end()) return -1;
  const std::string& v = it->second;
  if (buf && size > 0) {
    size_t n = std::min(v.size(), size - 1);
    std::memcpy(buf, v.data(), n);
    buf[n] = '\0';
  }
  return static_cast<int64_t>(v.size());
}

double pluginCounter(const std::string& kind, const std::string& name,
                     const std::string& counter) {
  auto& c = counters();
  std::lock_guard lock(c.mu);
  auto it = c.values.find({familyName(counter), kind, name});
  return it == c.values.end() ? 0.0 : it->second;
}

std::shared_ptr<prometheus::Collectable> pluginMetrics() {
  static auto collectable = std::make_shared<PluginCollectable>();
  return collectable;
}

}  // namespace kiln::plugins
