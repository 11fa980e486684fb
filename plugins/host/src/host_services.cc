#include "kiln/plugin_host/host_services.h"

#include <cstring>
#include <mutex>

#include "kiln/common/logging.h"

namespace kiln::plugins {
namespace {

std::mutex gCountersMu;
std::map<std::string, double>& counters() {
  static std::map<std::string, double> c;
  return c;
}

}  // namespace

HostServices::HostServices(std::string label, std::string metricPrefix,
                           PluginConfig config)
    : label_(std::move(label)),
      metricPrefix_(std::move(metricPrefix)),
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

void HostServices::metricAdd(void* ctx, const char* name, double delta) {
  auto* self = static_cast<HostServices*>(ctx);
  std::lock_guard lock(gCountersMu);
  counters()[self->metricPrefix_ + (name ? name : "")] += delta;
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

std::map<std::string, double> pluginCounters() {
  std::lock_guard lock(gCountersMu);
  return counters();
}

}  // namespace kiln::plugins
