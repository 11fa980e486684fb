// `kiln plugins`: what the plugin loader finds (docs/plugin-abi.md).
#include <boost/program_options.hpp>
#include <iomanip>
#include <iostream>

#include "cli_common.h"
#include "command.h"
#include "kiln/plugin_host/registry.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;

int runPlugins(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln plugins [--plugin-dir DIR ...]\n\n"
      "Lists the plugins kiln loads: kind, name, version, the ABI each was\n"
      "built against and the file it came from; then every library that\n"
      "was refused, with the reason. Exits 1 if any was refused.\n\n"
      "Options");
  std::vector<std::string> dirs;
  opts.add_options()("help,h", "show this help")(
      "plugin-dir", po::value(&dirs)->composing(),
      "search this directory (repeatable; default: $KILN_PLUGIN_PATH, or "
      "the build tree's and the installed plugin folders)");
  po::variables_map vm;
  std::vector<std::string> none;
  if (auto rc = parseCommandLine("plugins", opts, none, 0, args, vm, 0))
    return *rc;
  plugins::configurePluginDirs(dirs);
  auto& registry = plugins::processPlugins();
  std::string searched;
  for (auto& d : registry.directories())
    searched += (searched.empty() ? "" : ":") + d;
  std::cout << "searched: " << searched << "\n";
  std::cout << std::left << std::setw(10) << "KIND" << std::setw(14) << "NAME"
            << std::setw(10) << "VERSION" << std::setw(6) << "ABI"
            << "FILE\n";
  for (auto& p : registry.plugins())
    std::cout << std::setw(10) << plugins::kindName(p.kind) << std::setw(14)
              << p.name << std::setw(10) << p.version << std::setw(6)
              << (std::to_string(p.abiMajor) + "." + std::to_string(p.abiMinor))
              << p.file << "\n    " << p.summary << "\n";
  auto refused = registry.refusals();
  for (auto& r : refused)
    std::cout << "refused " << r.file << ": " << r.reason << "\n";
  return refused.empty() ? kExitOk : kExitFailure;
}

RegisterCommand reg("plugins", "list the plugins kiln loads and from where",
                    runPlugins);

}  // namespace
}  // namespace kiln::cli
