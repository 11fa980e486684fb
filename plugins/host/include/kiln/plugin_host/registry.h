#pragma once
/// Loading plugin libraries (design decision 7, docs/plugin-abi.md). The
/// registry dlopens every `kiln-plugin-*.so` of its search directories,
/// checks each descriptor (ABI major, kind, name, required functions) and
/// keeps what passes; a library that fails is refused with the file and
/// the reason, and the others still load. Nothing is ever unloaded: a
/// plugin's code and descriptor stay valid until the process exits.

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/common/error.h"
#include "kiln/plugin/abi.h"

namespace kiln::plugins {

/// A loaded plugin: its descriptor's facts and where it came from.
struct PluginInfo {
  std::string file;  ///< absolute path of the library
  kiln_plugin_kind kind = KILN_PLUGIN_SANDBOX;
  std::string name;                     ///< unique per kind
  std::string version;                  ///< the plugin's own version
  std::string summary;                  ///< one line
  unsigned abiMajor = 0, abiMinor = 0;  ///< what it was built against
  const void* functions = nullptr;      ///< the kind's table (never freed)
  uint32_t functionsSize = 0;           ///< the table's own size field
};

/// A library that was not accepted, and why.
struct PluginRefusal {
  std::string file;
  std::string reason;
};

/// "sandbox", "platform", "evaluator", "notifier" (or "kind N").
std::string kindName(uint32_t kind);
/// The kind called `name`, if it is one.
std::optional<kiln_plugin_kind> parseKind(std::string_view name);

/// The plugin folder found from an executable's folder `exeDir`, so that an
/// install works wherever it is moved: `exeDir/../lib/kiln/plugins` (an
/// installed `bin/kiln`) if it exists, else `exeDir/../plugins/lib` (the
/// build tree's `cli/kiln`) if it exists, else the build tree's and the
/// install prefix's folders this build was configured with. Never throws.
std::vector<std::string> pluginDirsBeside(const std::string& exeDir);

/// The directories searched when none are configured: `$KILN_PLUGIN_PATH`
/// (colon-separated) if set, otherwise pluginDirsBeside() the running
/// executable (`/proc/self/exe`).
std::vector<std::string> defaultPluginDirs();

/// Loaded plugins. Thread-safe; entries are never removed.
class PluginRegistry {
 public:
  /// Loads every `kiln-plugin-*.so` in each directory, in name order;
  /// missing directories are skipped. Refusals are recorded, not thrown.
  void loadDirectories(const std::vector<std::string>& dirs);
  /// Loads one library. Returns the plugin, or nullptr when it was refused
  /// (see refusals()). Loading the same file again returns the first load.
  const PluginInfo* loadFile(const std::string& path);
  /// Every accepted plugin, in load order.
  std::vector<PluginInfo> plugins() const;
  /// Every refused library, in load order.
  std::vector<PluginRefusal> refusals() const;
  /// The plugin of `kind` called `name`, or nullptr.
  const PluginInfo* find(kiln_plugin_kind kind, std::string_view name) const;
  /// Like find(); throws Error naming the plugins of that kind that exist
  /// (and the refusals, which often explain a missing one).
  const PluginInfo& require(kiln_plugin_kind kind, std::string_view name) const;
  /// The directories loaded so far.
  std::vector<std::string> directories() const;

 private:
  const PluginInfo* loadLocked(const std::string& path);
  std::string validate(const kiln_plugin_descriptor* d) const;

  mutable std::mutex mu_;
  std::deque<PluginInfo> plugins_;  // deque: pointers stay valid
  std::vector<PluginRefusal> refusals_;
  std::vector<std::string> dirs_;
};

/// Sets the directories the process registry loads from (before its first
/// use; later calls load the new directories too). Empty: the defaults.
void configurePluginDirs(const std::vector<std::string>& dirs);
/// The process-wide registry, loaded on first use from the configured or
/// default directories.
PluginRegistry& processPlugins();

}  // namespace kiln::plugins
