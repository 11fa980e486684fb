#include "sandbox_options.h"

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
      "plugin-dir", po::value(&out.pluginDirs)->composing(),
      "search plugins here (repeatable; default: $KILN_PLUGIN_PATH, the "
      "build tree, the install folder)");
}

std::vector<std::string> sandboxArgs(const SandboxOptions& o) {
  std::vector<std::string> args = {"--sandbox", o.name};
  for (auto& kv : o.options) args.insert(args.end(), {"--sandbox-option", kv});
  for (auto& d : o.pluginDirs) args.insert(args.end(), {"--plugin-dir", d});
  return args;
}

void applySandboxOptions(const SandboxOptions& o, worker::DaemonConfig& cfg) {
  for (auto& kv : o.options) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("--sandbox-option " + kv + ": want KEY=VALUE");
    cfg.sandboxOptions[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  cfg.sandbox = o.name;
  plugins::configurePluginDirs(o.pluginDirs);
}

}  // namespace kiln::cli
