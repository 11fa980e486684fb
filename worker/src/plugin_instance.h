#pragma once
// Creating an instance of a loaded plugin, shared by PluginSandbox and
// PluginPlatform.

#include <memory>

#include "kiln/plugin_host/host_services.h"
#include "kiln/plugin_host/registry.h"

namespace kiln::worker {

/// A plugin's `create` function (the same type in every table).
using PluginCreateFn = kiln_status (*)(const kiln_host_services*, void**,
                                       kiln_error*);

/// Checks that `plugin` is of `kind`, makes its host services (log prefix
/// and counters named after it) with `config` and creates an instance into
/// `*instance`. Returns the services, which must outlive the instance.
/// Throws Error naming the plugin (wrong kind, or its create's message).
std::unique_ptr<plugins::HostServices> createPluginInstance(
    const plugins::PluginInfo& plugin, kiln_plugin_kind kind,
    PluginCreateFn create, plugins::PluginConfig config, void** instance);

}  // namespace kiln::worker
