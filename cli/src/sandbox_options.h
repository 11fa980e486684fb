#pragma once
/// The sandbox options shared by `kiln worker` and `kiln serve`
/// (docs/worker.md, "Sandboxes"): which sandbox plugin, its options, and
/// where plugins are searched.

#include <boost/program_options.hpp>
#include <memory>
#include <string>
#include <vector>

#include "kiln/worker/daemon.h"
#include "limit_options.h"
#include "pressure_options.h"

namespace kiln::cli {

/// What the command line chose.
struct SandboxOptions {
  std::string name = "linux";           ///< the sandbox plugin
  std::vector<std::string> options;     ///< KEY=VALUE
  std::vector<std::string> pluginDirs;  ///< empty: the defaults
  /// The platform plugins, comma-separated (docs/worker.md, "Platforms").
  std::string platforms = "native,qemu-user";
  std::vector<std::string> platformOptions;  ///< KEY=VALUE
  /// The builds' resource limits (docs/worker.md, "Limits per build").
  BuildLimitOptions limits;
  /// The worker's pressure thresholds (`kiln worker` and `kiln serve` add
  /// them with addPressureOptions; `kiln build` has none).
  PressureOptions pressure;
};

/// Adds --sandbox, --sandbox-option, --platforms, --platform-option,
/// --plugin-dir and the build limits (limit_options.h) to `opts`.
void addSandboxOptions(boost::program_options::options_description& opts,
                       SandboxOptions& out);

/// The same options as `kiln worker` arguments (for `kiln serve`).
std::vector<std::string> sandboxArgs(const SandboxOptions& o);

/// Puts the chosen sandbox, platforms and their options into `cfg` (the
/// daemon loads them), the build limits, and configures the plugin
/// directories, and the pressure thresholds. Throws Error for a malformed
/// --sandbox-option, --platform-option, limit or threshold.
void applySandboxOptions(const SandboxOptions& o, worker::DaemonConfig& cfg);

}  // namespace kiln::cli
