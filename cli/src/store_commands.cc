// `kiln store add`, `kiln store path-info`, `kiln store query`: adding to
// and querying the local store (docs/operations.md, state directory).
#include <boost/program_options.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command.h"
#include "store_cli.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;

int storeAdd(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln store add [OPTIONS] PATH...\n\n"
      "Adds each file or tree to the store as a `source` path (like\n"
      "`nix-store --add`) and prints its store path.\n\nOptions");
  StoreLocation loc;
  std::string name;
  opts.add_options()("help,h", "show this help")(
      "name", po::value(&name), "store path name (one PATH only; default: its base name)");
  loc.addOptions(opts);
  std::vector<std::string> paths;
  po::variables_map vm;
  if (auto rc = parseCommandLine("store add", opts, paths, -1, args, vm)) return *rc;
  if (!name.empty() && paths.size() != 1) {
    std::cerr << "kiln store add: --name needs exactly one PATH\n";
    return kExitUsage;
  }
  return guarded("store add", [&] {
    auto store = loc.open();
    for (auto& p : paths) std::cout << store->printPath(store->addPath(p, name)) << "\n";
    return kExitOk;
  });
}

nlohmann::json infoJson(store::LocalStore& store, const store::ValidPathInfo& info) {
  nlohmann::json refs = nlohmann::json::array();
  for (auto& r : info.references) refs.push_back(store.printPath(r));
  nlohmann::json j = {{"path", store.printPath(info.path)},
                      {"narHash", info.narHash.to(HashFormat::kSri)},
                      {"narSize", info.narSize},
                      {"references", refs},
                      {"registrationTime", info.registrationTime},
                      {"ultimate", info.ultimate},
                      {"valid", true}};
  if (info.deriver) j["deriver"] = store.printPath(*info.deriver);
  if (!info.ca.empty()) j["ca"] = info.ca;
  if (!info.sigs.empty()) j["signatures"] = info.sigs;
  return j;
}

void printInfo(store::LocalStore& store, const store::ValidPathInfo& info) {
  std::cout << store.printPath(info.path) << "\n"
            << "  NarHash: " << info.narHash.toNix32() << "\n"
            << "  NarSize: " << info.narSize << "\n";
  std::cout << "  References:";
  for (auto& r : info.references) std::cout << " " << r.baseName();
  std::cout << "\n";
  if (info.deriver) std::cout << "  Deriver: " << info.deriver->baseName() << "\n";
  if (!info.ca.empty()) std::cout << "  CA: " << info.ca << "\n";
  for (auto& s : info.sigs) std::cout << "  Sig: " << s << "\n";
  std::cout << "  Registered: " << info.registrationTime << "\n";
}

int storePathInfo(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln store path-info [--json] PATH...\n\n"
      "Prints the registered metadata of each store path. Exit code 4 if a\n"
      "path is not valid.\n\nOptions");
  StoreLocation loc;
  opts.add_options()("help,h", "show this help")("json", "print a JSON array");
  loc.addOptions(opts);
  std::vector<std::string> paths;
  po::variables_map vm;
  if (auto rc = parseCommandLine("store path-info", opts, paths, -1, args, vm)) return *rc;
  return guarded("store path-info", [&] {
    auto store = loc.open();
    nlohmann::json all = nlohmann::json::array();
    int rc = kExitOk;
    for (auto& p : paths) {
      auto path = resolveStorePath(*store, p);
      auto info = store->queryPathInfo(path);
      if (!info) {
        std::cerr << "kiln store path-info: path '" << store->printPath(path)
                  << "' is not valid\n";
        if (vm.count("json")) all.push_back({{"path", store->printPath(path)}, {"valid", false}});
        rc = kExitNotFound;
        continue;
      }
      if (vm.count("json"))
        all.push_back(infoJson(*store, *info));
      else
        printInfo(*store, *info);
    }
    if (vm.count("json")) std::cout << all.dump(2) << "\n";
    return rc;
  });
}

int storeQuery(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln store query (--references|--requisites|--referrers|--deriver) PATH...\n\n"
      "Prints the asked-for paths, one per line, sorted.\n\nOptions");
  StoreLocation loc;
  opts.add_options()("help,h", "show this help")("references", "direct references")(
      "requisites", "the closure (the paths themselves included)")(
      "referrers", "valid paths that refer to the paths")("deriver",
                                                          "the derivation that built each path");
  loc.addOptions(opts);
  std::vector<std::string> paths;
  po::variables_map vm;
  if (auto rc = parseCommandLine("store query", opts, paths, -1, args, vm)) return *rc;
  int modes = 0;
  for (auto m : {"references", "requisites", "referrers", "deriver"}) modes += vm.count(m) ? 1 : 0;
  if (modes != 1) {
    std::cerr << "kiln store query: give exactly one of --references, --requisites, "
                 "--referrers, --deriver\n"
              << opts;
    return kExitUsage;
  }
  return guarded("store query", [&] {
    auto store = loc.open();
    store::StorePathSet in, out;
    for (auto& p : paths) {
      auto path = resolveStorePath(*store, p);
      auto info = store->requirePathInfo(path);
      in.insert(path);
      if (vm.count("references")) out.insert(info.references.begin(), info.references.end());
      if (vm.count("referrers")) {
        auto r = store->queryReferrers(path);
        out.insert(r.begin(), r.end());
      }
      if (vm.count("deriver") && info.deriver) out.insert(*info.deriver);
    }
    if (vm.count("requisites")) out = store->queryRequisites(in);
    for (auto& p : out) std::cout << store->printPath(p) << "\n";
    return kExitOk;
  });
}

RegisterCommand regAdd("store add", "add files or trees to the local store", storeAdd);
RegisterCommand regInfo("store path-info", "show the metadata of store paths", storePathInfo);
RegisterCommand regQuery("store query", "references, closure, referrers or deriver of paths",
                         storeQuery);

}  // namespace
}  // namespace kiln::cli
