#pragma once
/// Platforms as the worker sees them (docs/worker.md, "Platforms"): a
/// platform plugin (`native`, `qemu-user`) says which systems it runs on
/// this host and how to execute a builder of one (directly, or under an
/// emulator). `Platforms` holds the worker's platforms in order: it
/// announces the union of their systems, and the first platform that runs
/// a system runs that system's builders.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/plugin_host/host_services.h"
#include "kiln/plugin_host/registry.h"

namespace kiln::worker {

/// How to execute one builder.
struct PlatformCommand {
  std::string file;               ///< what to execute (the builder, or qemu)
  std::vector<std::string> argv;  ///< from argument 0; the derivation's
                                  ///< arguments follow
  /// Host files the builder needs besides its closure (an emulator), to be
  /// shown read-only at the same path inside a sandbox.
  std::vector<std::string> hostPaths;
};

/// A platform plugin instance. Thread-safe (command() is const).
class PluginPlatform {
 public:
  /// Creates an instance of `plugin` (a platform) with `config` and asks
  /// it for its systems; throws Error with the plugin's message.
  PluginPlatform(const plugins::PluginInfo& plugin,
                 plugins::PluginConfig config);
  ~PluginPlatform();
  PluginPlatform(const PluginPlatform&) = delete;
  PluginPlatform& operator=(const PluginPlatform&) = delete;

  const std::string& name() const { return plugin_.name; }
  /// The systems it runs here (asked once, at construction).
  const std::vector<std::string>& systems() const { return systems_; }
  /// How to run `program` (a builder for `system`) with argument 0
  /// `argv0`. Throws Error if the plugin fails or does not run `system`.
  PlatformCommand command(const std::string& system, const std::string& program,
                          const std::string& argv0) const;

 private:
  const kiln_platform_functions& fns() const;

  plugins::PluginInfo plugin_;
  std::unique_ptr<plugins::HostServices> host_;
  void* instance_ = nullptr;
  std::vector<std::string> systems_;
};

/// The worker's platforms, in order.
class Platforms {
 public:
  /// No platform: builders are executed as they are.
  Platforms() = default;
  /// Loads platform plugins `names` from plugins::processPlugins(), each
  /// with `config`. Throws Error naming a missing or failing plugin.
  static std::shared_ptr<Platforms> load(const std::vector<std::string>& names,
                                         const plugins::PluginConfig& config);
  /// Adds `platform` after the others.
  void add(std::unique_ptr<PluginPlatform> platform);
  /// The union of their systems, first appearance first.
  std::vector<std::string> systems() const;
  /// The command of the first platform running `system`; nullopt when
  /// none does. Throws Error if that platform fails.
  std::optional<PlatformCommand> command(const std::string& system,
                                         const std::string& program,
                                         const std::string& argv0) const;

 private:
  std::vector<std::unique_ptr<PluginPlatform>> list_;
};

}  // namespace kiln::worker
