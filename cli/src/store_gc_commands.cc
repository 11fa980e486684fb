// `kiln store gc` and `kiln store verify`: garbage collection and integrity
// checks of the local store.
#include <boost/program_options.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command.h"
#include "store_cli.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;

int storeGc(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln store gc [--dry-run] [--json]\n\n"
      "Deletes store paths not reachable from a GC root (<state>/gcroots) or a\n"
      "running kiln process, and stale temporaries; prints what it deleted.\n\nOptions");
  StoreLocation loc;
  opts.add_options()("help,h", "show this help")("dry-run", "only print what would be deleted")(
      "json", "print a JSON object");
  loc.addOptions(opts);
  std::vector<std::string> none;
  po::variables_map vm;
  if (auto rc = parseCommandLine("store gc", opts, none, 0, args, vm, 0)) return *rc;
  return guarded("store gc", [&] {
    auto store = loc.open();
    bool dry = vm.count("dry-run") > 0;
    auto res = store->collectGarbage(dry);
    if (vm.count("json")) {
      nlohmann::json deleted = nlohmann::json::array();
      for (auto& p : res.deleted) deleted.push_back(store->printPath(p));
      nlohmann::json j = {{"dryRun", dry},
                          {"deleted", deleted},
                          {"bytesFreed", res.bytesFreed},
                          {"junkRemoved", res.junkRemoved}};
      std::cout << j.dump(2) << "\n";
      return kExitOk;
    }
    for (auto& p : res.deleted) std::cout << store->printPath(p) << "\n";
    std::cout << res.deleted.size() << " store paths " << (dry ? "would be " : "")
              << "deleted, " << res.junkRemoved << " stale temporaries, "
              << res.bytesFreed << " bytes " << (dry ? "would be " : "") << "freed\n";
    return kExitOk;
  });
}

const char* kindName(store::VerifyProblem::Kind k) {
  switch (k) {
    case store::VerifyProblem::Kind::kMissing:
      return "missing";
    case store::VerifyProblem::Kind::kHashMismatch:
      return "hash-mismatch";
    case store::VerifyProblem::Kind::kUnreadable:
      return "unreadable";
  }
  return "unknown";
}

int storeVerify(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln store verify [--json] [--repair]\n\n"
      "Re-hashes every valid path against its registered NAR hash and size.\n"
      "Exit code 1 if any problem was found.\n\nOptions");
  StoreLocation loc;
  opts.add_options()("help,h", "show this help")("json", "print a JSON object")(
      "repair", "unregister missing paths that nothing refers to");
  loc.addOptions(opts);
  std::vector<std::string> none;
  po::variables_map vm;
  if (auto rc = parseCommandLine("store verify", opts, none, 0, args, vm, 0)) return *rc;
  return guarded("store verify", [&] {
    auto store = loc.open();
    auto res = store->verify(vm.count("repair") > 0);
    if (vm.count("json")) {
      nlohmann::json problems = nlohmann::json::array();
      for (auto& p : res.problems)
        problems.push_back({{"path", store->printPath(p.path)},
                            {"kind", kindName(p.kind)},
                            {"detail", p.detail},
                            {"repaired", p.repaired}});
      std::cout << nlohmann::json{{"checked", res.checked}, {"problems", problems}}.dump(2)
                << "\n";
    } else {
      for (auto& p : res.problems)
        std::cout << kindName(p.kind) << ": " << store->printPath(p.path) << ": " << p.detail
                  << "\n";
      std::cout << res.checked << " paths checked, " << res.problems.size() << " problems\n";
    }
    return res.problems.empty() ? kExitOk : kExitFailure;
  });
}

RegisterCommand regGc("store gc", "delete store paths unreachable from GC roots", storeGc);
RegisterCommand regVerify("store verify", "check every store path against its NAR hash",
                          storeVerify);

}  // namespace
}  // namespace kiln::cli
