#include "plugin_instance.h"

#include "kiln/common/error.h"

namespace kiln::worker {

std::unique_ptr<plugins::HostServices> createPluginInstance(
    const plugins::PluginInfo& plugin, kiln_plugin_kind kind,
    PluginCreateFn create, plugins::PluginConfig config, void** instance) {
  std::string kindName = plugins::kindName(kind);
  if (plugin.kind != kind)
    throw Error("plugin '" + plugin.name + "' (" + plugin.file + ") is a " +
                plugins::kindName(plugin.kind) + " plugin, not a " + kindName);
  auto host = std::make_unique<plugins::HostServices>(kind, plugin.name,
                                                      std::move(config));
  kiln_error err{};
  if (create(host->table(), instance, &err) != KILN_OK)
    throw Error(kindName + " " + plugin.name + " (" + plugin.file +
                "): " + err.message);
  return host;
}

}  // namespace kiln::worker
