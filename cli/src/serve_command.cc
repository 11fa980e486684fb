// `kiln serve COLLECTION`: kiln's main job. Until the scheduler and web
// server exist (the farm issue), it puts the collection into the store as a
// source path under a GC root and reports where everything lives.
#include <boost/program_options.hpp>
#include <iostream>

#include "cli_common.h"
#include "command.h"
#include "kiln/common/file.h"
#include "store_cli.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;

int serve(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln serve [--state-dir DIR] COLLECTION\n\n"
      "Serves a Nix package collection (a folder). For now: adds it to the\n"
      "store as a source path with a GC root and prints where things are.\n\nOptions");
  StoreLocation loc;
  opts.add_options()("help,h", "show this help");
  loc.addOptions(opts);
  std::vector<std::string> paths;
  po::variables_map vm;
  if (auto rc = parseCommandLine("serve", opts, paths, 1, args, vm)) return *rc;
  return guarded("serve", [&] {
    std::string collection = absPath(paths[0]);
    if (!pathExists(collection))
      throw SysError("collection '" + collection + "'", ENOENT);
    auto store = loc.open();
    auto path = store->addPath(collection);
    auto link = store->addRoot("collections/" + baseNameOf(collection), path);
    std::cout << "collection: " << collection << "\n"
              << "store path: " << store->printPath(path) << "\n"
              << "state dir:  " << store->stateDir() << "\n"
              << "store:      " << store->physicalRoot() << " (logical "
              << store->storeDir().dir() << ")\n"
              << "GC root:    " << link << "\n"
              << "Inspect it: kiln store path-info --state-dir " << store->stateDir() << " "
              << store->printPath(path) << "\n"
              << "The scheduler, workers and web dashboard arrive with the farm issue; "
                 "this command will then keep serving the collection.\n";
    return kExitOk;
  });
}

RegisterCommand reg("serve", "serve a package collection (for now: add it to the store)",
                    serve);

}  // namespace
}  // namespace kiln::cli
