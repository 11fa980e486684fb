// `kiln cache gc` and `kiln cache pin add|remove|list`: closure-aware
// garbage collection of the farm's binary cache (docs/operations.md) and
// the named pins it keeps.
#include <boost/program_options.hpp>
#include <charconv>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command.h"
#include "database_options.h"
#include "kiln/scheduler/cache_roots.h"
#include "kiln/scheduler/state_db.h"
#include "kiln/store/cache_gc.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;
using nlohmann::json;

/// Where the state is: --database, else --state-dir's SQLite file.
struct StateOptions {
  std::string stateDir;
  DatabaseOptions database;

  void add(po::options_description& opts) {
    opts.add_options()("state-dir", po::value(&stateDir),
                       "the farm's state directory (its SQLite database)");
    database.add(opts);
  }
  /// The database, or nullopt after printing a usage error.
  std::optional<scheduler::DatabaseSpec> spec(const std::string& name) const {
    if (stateDir.empty() && database.url.empty()) {
      std::cerr << "kiln " << name
                << ": give --state-dir DIR or --database URL\n";
      return std::nullopt;
    }
    return database.spec(stateDir);
  }
};

/// Seconds in "90", "90s", "15m", "2h" or "7d"; nullopt otherwise.
std::optional<int64_t> parseDuration(const std::string& text) {
  int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || n < 0 || end == text.data()) return std::nullopt;
  std::string unit(end, text.data() + text.size());
  static const std::map<std::string, int64_t> kUnits = {
      {"", 1}, {"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400}};
  auto it = kUnits.find(unit);
  if (it == kUnits.end() || n > INT64_MAX / it->second / 1000)
    return std::nullopt;
  return n * it->second;
}

json itemsJson(const std::vector<store::CacheGcItem>& items) {
  json out = json::array();
  for (auto& i : items) {
    json j = {{"key", i.key}, {"size", i.size}};
    if (!i.path.empty()) j["path"] = i.path;
    out.push_back(j);
  }
  return out;
}

uint64_t bytesOf(const std::vector<store::CacheGcItem>& items) {
  uint64_t n = 0;
  for (auto& i : items) n += i.size;
  return n;
}

void printReport(const store::CacheSnapshot& snap, const store::CacheGcPlan& p,
                 const std::string& uri, bool dry, bool asJson) {
  store::StoreDir dir(snap.storeDir);
  json missing = json::array(), malformed = json::array();
  for (auto& r : p.missingRoots) missing.push_back(dir.printPath(r));
  for (auto& [key, why] : snap.malformed)
    malformed.push_back({{"key", key}, {"error", why}});
  if (asJson) {
    std::cout << json{{"cache", uri},
                      {"dryRun", dry},
                      {"narinfos", itemsJson(p.narinfos)},
                      {"nars", itemsJson(p.nars)},
                      {"narsWaiting", itemsJson(p.narsWaiting)},
                      {"missingRoots", missing},
                      {"malformed", malformed},
                      {"keptNarinfos", p.keptNarinfos},
                      {"keptNars", p.keptNars},
                      {"bytesFreed", bytesOf(p.narinfos) + bytesOf(p.nars)}}
                     .dump(2)
              << "\n";
    return;
  }
  std::string verb = dry ? "would delete " : "deleted ";
  for (auto& i : p.narinfos)
    std::cout << verb << i.key << " " << i.size << " " << snap.storeDir << "/"
              << i.path << "\n";
  for (auto& i : p.nars) std::cout << verb << i.key << " " << i.size << "\n";
  for (auto& i : p.narsWaiting)
    std::cout << "waiting " << i.key << " " << i.size
              << " (unnamed; deleted once the grace period has passed)\n";
  for (auto& m : missing)
    std::cout << "missing root " << m.get<std::string>() << "\n";
  for (auto& [key, why] : snap.malformed)
    std::cout << "kept malformed " << key << ": " << why << "\n";
  std::cout << (dry ? "would delete " : "deleted ") << p.narinfos.size()
            << " narinfo and listing files and " << p.nars.size() << " NARs ("
            << bytesOf(p.narinfos) + bytesOf(p.nars) << " bytes); kept "
            << p.keptNarinfos << " narinfos and " << p.keptNars << " NARs; "
            << p.narsWaiting.size() << " NARs wait for the grace period\n";
}

/// The roots: the latest evaluations' outputs and the pins, as paths of
/// `dir` (others are reported and skipped).
store::StorePathSet gcRoots(scheduler::StateDb& db, int64_t keep,
                            const store::StoreDir& dir) {
  auto paths = scheduler::latestEvaluationOutputs(db, keep);
  for (auto& pin : scheduler::CachePinStore(db).list()) paths.insert(pin.path);
  store::StorePathSet roots;
  for (auto& p : paths) {
    if (dir.isStorePath(p))
      roots.insert(dir.parsePath(p));
    else
      std::cerr << "kiln cache gc: root " << p << " is not in the cache's "
                << dir.dir() << "; ignored\n";
  }
  return roots;
}

int cacheGc(const std::vector<std::string>& args) {
  const std::string name = "cache gc";
  po::options_description opts(
      "Usage: kiln cache gc --cache URI (--state-dir DIR | --database URL)\n"
      "         [--keep-evaluations N] [--grace DURATION] [--dry-run] "
      "[--json]\n\n"
      "Deletes from a binary cache (s3://BUCKET?endpoint=... or file:///DIR)\n"
      "every narinfo outside the closure of the roots: the outputs of each\n"
      "jobset's latest N finished evaluations and the pins (`kiln cache "
      "pin`).\n"
      "A NAR file no remaining narinfo names is deleted once it has been\n"
      "unnamed for the grace period (runs record since when). Malformed\n"
      "narinfos are reported and kept.\n\nOptions");
  std::string uri, grace = "1h";
  int64_t keep = 3;
  StateOptions state;
  opts.add_options()("help,h", "show this help")("cache", po::value(&uri),
                                                 "the cache's URI")(
      "keep-evaluations", po::value(&keep),
      "finished evaluations of each jobset to keep (default 3)")(
      "grace", po::value(&grace),
      "how long a NAR stays after nothing names it: 90s, 15m, 1h (default), "
      "2d")("dry-run", "list what would go and change nothing")(
      "json", "print a JSON object");
  state.add(opts);
  std::vector<std::string> none;
  po::variables_map vm;
  if (auto rc = parseCommandLine(name, opts, none, 0, args, vm, 0)) return *rc;
  auto graceSec = parseDuration(grace);
  if (uri.empty() || keep < 1 || !graceSec) {
    std::cerr << "kiln " << name
              << ": give --cache, --keep-evaluations at least 1 and a "
                 "--grace like 90s, 15m, 1h or 2d\n";
    return kExitUsage;
  }
  return guarded(name, [&] {
    auto spec = state.spec(name);
    if (!spec) return static_cast<int>(kExitUsage);
    scheduler::StateDb db(*spec, scheduler::StateDb::ReadOnly{});
    auto storage = store::openCacheStorage(uri);
    auto snap = store::readCacheSnapshot(*storage);
    auto roots = gcRoots(db, keep, store::StoreDir(snap.storeDir));
    bool dry = vm.count("dry-run") > 0;
    auto plan = store::planCacheGc(snap, roots, std::time(nullptr),
                                   std::chrono::seconds(*graceSec));
    if (!dry) store::applyCacheGc(*storage, plan);
    printReport(snap, plan, storage->uri(), dry, vm.count("json") > 0);
    return static_cast<int>(kExitOk);
  });
}

int cachePin(const std::vector<std::string>& args, const std::string& verb) {
  const std::string name = "cache pin " + verb;
  int words = verb == "add" ? 2 : verb == "remove" ? 1 : 0;
  po::options_description opts(
      "Usage: kiln cache pin add NAME STORE-PATH | remove NAME | list\n"
      "         (--state-dir DIR | --database URL) [--json]\n\n"
      "Named pins: `kiln cache gc` keeps the whole closure of each pinned\n"
      "path. Adding an existing name moves the pin.\n\nOptions");
  StateOptions state;
  opts.add_options()("help,h", "show this help")("json", "print JSON");
  state.add(opts);
  std::vector<std::string> pos;
  po::variables_map vm;
  if (auto rc = parseCommandLine(name, opts, pos, words, args, vm, words))
    return *rc;
  return guarded(name, [&] {
    auto spec = state.spec(name);
    if (!spec) return static_cast<int>(kExitUsage);
    scheduler::StateDb db(*spec, scheduler::StateDb::Existing{});
    scheduler::CachePinStore pins(db);
    if (verb == "add") {
      pins.add(pos[0], pos[1], static_cast<int64_t>(std::time(nullptr)) * 1000);
    } else if (verb == "remove") {
      if (!pins.remove(pos[0])) {
        std::cerr << "kiln " << name << ": no pin named " << pos[0] << "\n";
        return static_cast<int>(kExitNotFound);
      }
    } else {
      json out = json::array();
      for (auto& p : pins.list()) {
        if (!vm.count("json")) std::cout << p.name << "\t" << p.path << "\n";
        out.push_back(
            {{"name", p.name}, {"path", p.path}, {"createdMs", p.createdMs}});
      }
      if (vm.count("json")) std::cout << out.dump(2) << "\n";
    }
    return static_cast<int>(kExitOk);
  });
}

RegisterCommand regGc("cache gc",
                      "delete what the binary cache's roots do not need",
                      cacheGc);
RegisterCommand regPinAdd("cache pin add",
                          "keep a store path's closure in the binary cache",
                          [](const std::vector<std::string>& a) {
                            return cachePin(a, "add");
                          });
RegisterCommand regPinRemove("cache pin remove", "remove a binary cache pin",
                             [](const std::vector<std::string>& a) {
                               return cachePin(a, "remove");
                             });
RegisterCommand regPinList("cache pin list", "list the binary cache's pins",
                           [](const std::vector<std::string>& a) {
                             return cachePin(a, "list");
                           });

}  // namespace
}  // namespace kiln::cli
