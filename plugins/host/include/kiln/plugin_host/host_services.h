#pragma once
/// The services kiln offers a plugin instance (kiln_host_services): logging
/// into kiln's log with the plugin's kind and name, counters (served on
/// `/metrics` through pluginMetrics(), labelled with the plugin), and the
/// plugin's own configuration keys.

#include <prometheus/collectable.h>

#include <map>
#include <memory>
#include <string>

#include "kiln/plugin/abi.h"

namespace kiln::plugins {

/// Configuration of one plugin instance: key → value.
using PluginConfig = std::map<std::string, std::string>;

/// Owns the kiln_host_services table handed to one plugin instance; must
/// outlive the instance (and not move: the table points at it).
class HostServices {
 public:
  /// Services for plugin `name` of `kind`: log lines are prefixed with
  /// "<kind> <name>", counters are labelled kind="<kind>",plugin="<name>".
  HostServices(kiln_plugin_kind kind, std::string name, PluginConfig config);
  HostServices(const HostServices&) = delete;
  HostServices& operator=(const HostServices&) = delete;

  /// The C table to pass to the plugin's create().
  const kiln_host_services* table() const { return &table_; }
  /// The configuration the plugin sees.
  const PluginConfig& config() const { return config_; }

 private:
  static void log(void* ctx, kiln_log_level level, const char* message);
  static void metricAdd(void* ctx, const char* name, double delta);
  static int64_t configGet(void* ctx, const char* key, char* buf, size_t size);

  std::string kind_, name_, label_;
  PluginConfig config_;
  kiln_host_services table_;
};

/// The value of counter `counter` (as the plugin named it, "_total" added
/// when missing) of plugin `name` of kind `kind` ("sandbox", ...); 0 when
/// it was never added to.
double pluginCounter(const std::string& kind, const std::string& name,
                     const std::string& counter);

/// Every plugin counter of the process as Prometheus families, one per
/// counter name (`kiln_plugin_<counter>`, type counter) with one sample per
/// plugin (labels `kind`, `plugin`), read at each Collect(). For a web
/// registry's `/metrics` (WebContext::extraMetrics). Thread-safe.
std::shared_ptr<prometheus::Collectable> pluginMetrics();

}  // namespace kiln::plugins
