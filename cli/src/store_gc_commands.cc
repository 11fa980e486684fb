// `kiln store gc` and `kiln store verify`: garbage collection and integrity
// checks of the local store.
#include <boost/program_options.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli_common.h"
#include "command.h"
#include "database_options.h"
#include "kiln/scheduler/source_roots.h"
#include "store_cli.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;

// With --keep-evaluations: the roots of the evaluations' kept sources
// made those the farm still references (source_roots.h), reported on
// stderr; in a dry run only planned, and returned for previewGarbage so
// the dry run lists what the real run deletes.
store::GcRootChanges syncSourceRoots(const DatabaseOptions& database,
                                     const StoreLocation& loc,
                                     store::LocalStore& store, int64_t keep,
                                     bool dry) {
  std::string stateDir =
      loc.stateDir.empty() ? defaultStateDir() : loc.stateDir;
  scheduler::StateDb db(database.spec(stateDir),
                        scheduler::StateDb::Existing{});
  std::optional<scheduler::SourceRootsPlan> plan;
  if (dry) plan = scheduler::planEvalSourceRoots(db, store, keep);
  auto sync =
      plan ? plan->counts() : scheduler::syncEvalSourceRoots(db, store, keep);
  const char* would = dry ? " would be" : "";
  std::cerr << "evaluation sources: " << sync.kept << " rooted, " << sync.added
            << " roots" << would << " restored, " << sync.removed << " roots"
            << would << " dropped\n";
  return plan ? plan->gcChanges(store) : store::GcRootChanges{};
}

int storeGc(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln store gc [--dry-run] [--json] [--keep-evaluations N "
      "[--database URL]]\n\n"
      "Deletes store paths not reachable from a GC root (<state>/gcroots)\n"
      "or a running kiln process, and stale temporaries; prints what it\n"
      "deleted. On a scheduler's state directory, --keep-evaluations first\n"
      "drops the roots of evaluation sources no longer referenced\n"
      "(docs/operations.md); with --dry-run it changes no root and lists\n"
      "what the real run deletes.\n\n"
      "Options");
  StoreLocation loc;
  DatabaseOptions database;
  int64_t keep = 0;
  opts.add_options()("help,h", "show this help")(
      "dry-run", "only print what would be deleted")("json",
                                                     "print a JSON object")(
      "keep-evaluations", po::value(&keep),
      "keep the evaluated sources (a channel's nixexprs.tar.xz) of each "
      "jobset's latest N finished evaluations and of each channel's "
      "evaluation; drop the roots of the others (reads the farm's state "
      "database)");
  loc.addOptions(opts);
  database.add(opts);
  std::vector<std::string> none;
  po::variables_map vm;
  if (auto rc = parseCommandLine("store gc", opts, none, 0, args, vm, 0))
    return *rc;
  if (vm.count("keep-evaluations") && keep < 1) {
    std::cerr << "kiln store gc: --keep-evaluations must be at least 1\n";
    return kExitUsage;
  }
  return guarded("store gc", [&] {
    auto store = loc.open();
    bool dry = vm.count("dry-run") > 0;
    std::optional<store::GcRootChanges> changes;
    if (keep > 0) changes = syncSourceRoots(database, loc, *store, keep, dry);
    auto res = dry && changes ? store->previewGarbage(*changes)
                              : store->collectGarbage(dry);
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
    std::cout << res.deleted.size() << " store paths "
              << (dry ? "would be " : "") << "deleted, " << res.junkRemoved
              << " stale temporaries, " << res.bytesFreed << " bytes "
              << (dry ? "would be " : "") << "freed\n";
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
  if (auto rc = parseCommandLine("store verify", opts, none, 0, args, vm, 0))
    return *rc;
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
      std::cout << nlohmann::json{{"checked", res.checked},
                                  {"problems", problems}}
                       .dump(2)
                << "\n";
    } else {
      for (auto& p : res.problems)
        std::cout << kindName(p.kind) << ": " << store->printPath(p.path)
                  << ": " << p.detail << "\n";
      std::cout << res.checked << " paths checked, " << res.problems.size()
                << " problems\n";
    }
    return res.problems.empty() ? kExitOk : kExitFailure;
  });
}

RegisterCommand regGc("store gc",
                      "delete store paths unreachable from GC roots", storeGc);
RegisterCommand regVerify("store verify",
                          "check every store path against its NAR hash",
                          storeVerify);

}  // namespace
}  // namespace kiln::cli
