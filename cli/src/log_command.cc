// `kiln log`: prints a step's build log from a scheduler's state directory
// (like `nix log`), the last attempt unless told otherwise.
#include <boost/program_options.hpp>
#include <fstream>
#include <iostream>

#include "cli_common.h"
#include "command.h"
#include "database_options.h"
#include "kiln/common/error.h"
#include "kiln/scheduler/logs.h"
#include "kiln/scheduler/state_view.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;

int logCommand(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln log --state-dir DIR [--attempt N | --list] DRV\n\n"
      "Prints the build log of the step that builds DRV (a .drv path or its\n"
      "base name), as the scheduler received it from the worker: the last\n"
      "attempt by default. With --database, the step is looked up there\n"
      "and its logs are still read from --state-dir.\n\nOptions");
  std::string stateDir;
  DatabaseOptions database;
  int attempt = 0;
  opts.add_options()("help,h", "show this help")(
      "state-dir", po::value(&stateDir)->required(),
      "the scheduler's state directory")(
      "attempt", po::value(&attempt), "print this attempt (1 = the first)")(
      "list", "list the attempts that have a log, one per line");
  database.add(opts);
  std::vector<std::string> drvs;
  po::variables_map vm;
  if (auto rc = parseCommandLine("log", opts, drvs, 1, args, vm)) return *rc;
  return guarded("log", [&] {
    auto view = scheduler::StateView::openIfExists(database.spec(stateDir));
    auto files = view ? scheduler::stepLogFiles(view->rows(), stateDir, drvs[0])
                      : std::vector<std::pair<int, std::string>>{};
    if (vm.count("list")) {
      for (auto& [n, path] : files) std::cout << n << "\t" << path << "\n";
      return kExitOk;
    }
    const std::string* chosen = nullptr;
    for (auto& [n, path] : files)
      if (attempt == 0 || n == attempt) chosen = &path;
    if (!chosen) {
      std::cerr << "kiln log: no build log for " << drvs[0]
                << (attempt ? " attempt " + std::to_string(attempt) : "")
                << " in " << stateDir
                << "/logs (has the step started? see `kiln queue`)\n";
      return kExitNotFound;
    }
    std::ifstream in(*chosen, std::ios::binary);
    if (!in) throwSysError("opening " + *chosen);
    std::cout << in.rdbuf();
    return kExitOk;
  });
}

RegisterCommand reg("log", "print the build log of a derivation's step",
                    logCommand);

}  // namespace
}  // namespace kiln::cli
