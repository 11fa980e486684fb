#pragma once
/// The services kiln offers a plugin instance (kiln_host_services): logging
/// into kiln's log with the plugin's name, counters, and the plugin's own
/// configuration keys.

#include <map>
#include <string>

#include "kiln/plugin/abi.h"

namespace kiln::plugins {

/// Configuration of one plugin instance: key → value.
using PluginConfig = std::map<std::string, std::string>;

/// Owns the kiln_host_services table handed to one plugin instance; must
/// outlive the instance (and not move: the table points at it).
class HostServices {
 public:
  /// `label` prefixes log lines ("sandbox linux"); `metricPrefix` the
  /// counters ("kiln_plugin_linux_").
  HostServices(std::string label, std::string metricPrefix,
               PluginConfig config);
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

  std::string label_, metricPrefix_;
  PluginConfig config_;
  kiln_host_services table_;
};

/// The counters plugins have added to, by full name.
std::map<std::string, double> pluginCounters();

}  // namespace kiln::plugins
