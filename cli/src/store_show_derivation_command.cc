// `kiln store show-derivation`: prints .drv files as `nix show-derivation`
// JSON; with --check also recomputes their output and .drv paths.
#include <boost/program_options.hpp>
#include <cerrno>
#include <iostream>

#include "command.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/derivation.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;
using store::Derivation;
using store::StoreDir;
using store::StorePath;

/// Recomputes `drv`'s output paths from its masked form and its .drv path;
/// returns the problems found (empty if it matches what Nix would write).
std::string checkDerivation(const StoreDir& sd, const std::string& file,
                            const StorePath& expected, const Derivation& drv) {
  store::DrvHashCache cache(sd, store::fileDrvLoader(sd, dirNameOf(file)));
  Derivation d = drv;
  for (auto& [name, o] : d.outputs) {
    o.path.reset();
    d.env.erase(name);
  }
  store::fillOutputPaths(d, cache);
  std::string problems;
  if (d.outputs != drv.outputs || d.env != drv.env)
    problems += file + ": output paths differ from the recomputed ones\n";
  StorePath p = store::derivationPath(sd, drv);
  if (p != expected)
    problems += file + ": recomputed .drv path is " + sd.printPath(p) + "\n";
  return problems;
}

/// The store path a .drv file stands for, from its base name.
StorePath parseDrvFileName(const std::string& file) {
  try {
    return StorePath(baseNameOf(file));
  } catch (const FormatError& e) {
    throw FormatError("'" + file + "' is not named like a store derivation: " +
                      e.what());
  }
}

int showDerivation(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln store show-derivation [--store-dir DIR] [--check] "
      "DRVFILE...\n\nPrints the derivations as a JSON object keyed by .drv "
      "path (the shape of `nix show-derivation`).\n\nOptions");
  std::string storeDir = "/nix/store";
  std::vector<std::string> files;
  opts.add_options()("help,h", "show this help")(
      "store-dir", po::value(&storeDir),
      "logical store directory (default /nix/store)")(
      "check",
      "recompute output and .drv paths (input .drv files are read from the "
      "same directory) and fail if they differ");
  po::options_description hidden;
  hidden.add_options()("file", po::value(&files)->required());
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("file", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(),
              vm);
    if (vm.count("help")) {
      std::cout << opts;
      return kExitOk;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "kiln store show-derivation: " << e.what() << "\n" << opts;
    return kExitUsage;
  }
  try {
    StoreDir sd(storeDir);
    std::map<StorePath, Derivation> drvs;
    std::string problems;
    for (auto& f : files) {
      Derivation drv = store::readDerivationFile(sd, f);
      StorePath path = parseDrvFileName(f);
      if (vm.count("check")) problems += checkDerivation(sd, f, path, drv);
      drvs.emplace(path, std::move(drv));
    }
    std::cout << store::showDerivationJson(sd, drvs);
    if (!problems.empty()) {
      std::cerr << problems;
      return kExitFailure;
    }
  } catch (const SysError& e) {
    std::cerr << "kiln store show-derivation: " << e.what() << "\n";
    return e.errNo() == ENOENT ? kExitNotFound : kExitFailure;
  } catch (const FormatError& e) {
    std::cerr << "kiln store show-derivation: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const Error& e) {
    std::cerr << "kiln store show-derivation: " << e.what() << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

RegisterCommand reg("store show-derivation",
                    "print .drv files as JSON (like nix show-derivation)",
                    showDerivation);

}  // namespace
}  // namespace kiln::cli
