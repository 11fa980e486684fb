#include "sandbox_options.h"

#include <algorithm>

#include "kiln/common/error.h"
#include "kiln/plugin_host/registry.h"

namespace kiln::cli {

namespace po = boost::program_options;

void addSandboxOptions(po::options_description& opts, SandboxOptions& out) {
  opts.add_options()(
      "sandbox", po::value(&out.name),
      "sandbox plugin isolating the builders (default linux; none runs "
      "them unisolated, for development only)")(
      "sandbox-option", po::value(&out.options)->composing(),
      "KEY=VALUE for the sandbox (repeatable), e.g. extra-paths='/bin/sh "
      "/lib' (linux default: /bin /usr/bin /lib /lib64? /usr/lib)")(
      "platforms", po::value(&out.platforms),
      "platform plugins running the builders, in order (default "
      "native,qemu-user: the host's systems, others under qemu-user-static)")(
      "platform-option", po::value(&out.platformOptions)->composing(),
      "KEY=VALUE for the platforms (repeatable), e.g. qemu-dir=/usr/bin")(
      "plugin-dir", po::value(&out.pluginDirs)->composing(),
      "search plugins here (repeatable; default: $KILN_PLUGIN_PATH, the "
      "build tree, the install folder)");
  addBuildLimitOptions(opts, out.limits);
}

std::vector<std::string> sandboxArgs(const SandboxOptions& o) {
  std::vector<std::string> args = {"--sandbox", o.name};
  for (auto& kv : o.options) args.insert(args.end(), {"--sandbox-option", kv});
  for (auto& d : o.pluginDirs) args.insert(args.end(), {"--plugin-dir", d});
  args.insert(args.end(), {"--platforms", o.platforms});
  for (auto& kv : o.platformOptions)
    args.insert(args.end(), {"--platform-option", kv});
  auto limits = buildLimitArgs(o.limits);
  args.insert(args.end(), limits.begin(), limits.end());
  auto pressure = pressureArgs(o.pressure);
  args.insert(args.end(), pressure.begin(), pressure.end());
  return args;
}

namespace {

// KEY=VALUE options of `flag` into `out`; throws Error for a malformed one.
void parseKeyValues(const std::string& flag,
                    const std::vector<std::string>& options,
                    plugins::PluginConfig& out) {
  for (auto& kv : options) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(flag + " " + kv + ": want KEY=VALUE");
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
}

}  // namespace

void applySandboxOptions(const SandboxOptions& o, worker::DaemonConfig& cfg) {
  parseKeyValues("--sandbox-option", o.options, cfg.sandboxOptions);
  parseKeyValues("--platform-option", o.platformOptions, cfg.platformOptions);
  cfg.sandbox = o.name;
  cfg.platforms.clear();
  for (size_t start = 0; start < o.platforms.size();) {
    size_t end = std::min(o.platforms.find(',', start), o.platforms.size());
    if (end > start)
      cfg.platforms.push_back(o.platforms.substr(start, end - start));
    start = end + 1;
  }
  cfg.buildLimits = parseBuildLimits(o.limits);
  cfg.bigBuildLimits = parseBigBuildLimits(o.limits);
  cfg.thresholds = parsePressureOptions(o.pressure);
  plugins::configurePluginDirs(o.pluginDirs);
}

}  // namespace kiln::cli
