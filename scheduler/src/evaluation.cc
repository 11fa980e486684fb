// Evaluations: job lines, input fingerprints and the import from a Nix
// chroot store (docs/scheduler.md).
#include "kiln/scheduler/evaluation.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kiln/common/file.h"
#include "kiln/common/logging.h"
#include "kiln/store/derivation.h"
#include "kiln/store/nar.h"
#include "kiln/store/refs.h"
#include "run_command.h"

namespace kiln::scheduler {

using nlohmann::json;

std::map<std::string, plugins::PluginConfig> withBuiltinKiln(
    std::map<std::string, plugins::PluginConfig> configs,
    const std::string& kilnBinary) {
  auto& builtin = configs["builtin"];
  if (!builtin.count("kiln"))
    builtin["kiln"] = kilnBinary.empty() ? "kiln" : kilnBinary;
  return configs;
}

namespace {

// An aggregate's `constituents`: `.drv` paths, bounded.
void parseConstituents(Job& job, const json& list) {
  auto bad = [&](const std::string& why) {
    return FormatError("job line for '" + job.attr + "': 'constituents' " + why);
  };
  if (!list.is_array()) throw bad("is not an array");
  if (list.size() > kMaxConstituents)
    throw bad("has more than " + std::to_string(kMaxConstituents) + " entries");
  for (auto& c : list) {
    if (!c.is_string()) throw bad("holds a value that is not a string");
    const std::string& path = c.get_ref<const std::string&>();
    if (path.size() < 5 || path.compare(path.size() - 4, 4, ".drv") != 0)
      throw bad("holds '" + path + "', not a .drv path");
    job.constituents.push_back(path);
  }
  job.aggregate = true;
}

}  // namespace

Job parseJobLine(const std::string& line, bool needSystem) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {
    throw FormatError(std::string("job line: not JSON: ") + e.what());
  }
  if (!j.is_object()) throw FormatError("job line: not a JSON object");
  auto str = [&](const char* k) -> std::string {
    if (!j.contains(k)) return "";
    if (!j[k].is_string())
      throw FormatError(std::string("job line: field '") + k +
                        "' is not a string");
    return j[k].get<std::string>();
  };
  Job job;
  job.attr = str("attr");
  if (job.attr.empty()) throw FormatError("job line: missing 'attr'");
  job.error = str("error");
  if (!job.error.empty()) return job;
  job.name = str("name");
  job.system = str("system");
  job.drvPath = str("drvPath");
  if (job.drvPath.empty() || (needSystem && job.system.empty()))
    throw FormatError("job line for '" + job.attr +
                      "': needs 'drvPath' and 'system' (or 'error')");
  if (j.contains("outputs")) {
    if (!j["outputs"].is_object())
      throw FormatError("job line for '" + job.attr +
                        "': 'outputs' is not an object");
    for (auto& [k, v] : j["outputs"].items())
      if (v.is_string()) job.outputs[k] = v.get<std::string>();
  }
  if (j.contains("meta") && j["meta"].is_object()) applyMeta(job, j["meta"]);
  if (j.contains("constituents")) parseConstituents(job, j["constituents"]);
  return job;
}

void applyMeta(Job& job, const nlohmann::json& meta) {
  auto num = [&](const char* k) -> std::optional<int64_t> {
    auto it = meta.find(k);
    if (it == meta.end() || !it->is_number_integer()) return std::nullopt;
    auto v = it->get<int64_t>();
    if (v < 0)
      throw FormatError("job '" + job.attr + "': meta." + k + " is negative (" +
                        std::to_string(v) + ")");
    return v;
  };
  if (auto p = meta.find("schedulingPriority");
      p != meta.end() && p->is_number_integer())
    job.schedulingPriority = p->get<int>();
  if (auto v = num("maxSilent")) job.maxSilentSec = *v;
  if (auto v = num("timeout")) job.timeoutSec = *v;
}

namespace {

class RealInputFetcher final : public InputFetcher {
 public:
  Checkout fetch(const JobsetSpec& js, const std::string& workDir) override {
    if (js.kind == "path") {
      if (!std::filesystem::is_directory(js.location))
        throw Error("jobset '" + js.name + "': collection folder " +
                    js.location + " does not exist");
      HashingSink h(HashAlgo::kSha256);
      store::dumpPath(js.location, h, [](const std::string& p) {
        return baseNameOf(p) != ".git";
      });
      return {js.location, h.finish().first.toNix32(), workDir};
    }
    std::string dir = workDir + "/checkout";
    if (pathExists(dir)) deletePath(dir);
    createDirs(workDir);
    if (!js.revision.empty() || js.branch.rfind("refs/", 0) == 0)
      fetchOne(js, dir);
    else
      cloneBranch(js, dir);
    auto rev = runCommand({"git", "-C", dir, "rev-parse", "HEAD"});
    if (rev.exitCode != 0) throw Error("git rev-parse failed: " + rev.err);
    std::string h = rev.out.substr(0, rev.out.find('\n'));
    if (!js.revision.empty() && h != js.revision)
      throw Error("jobset '" + js.name + "': fetched " + h + ", not " +
                  js.revision);
    return {dir, "git:" + h, workDir};
  }

 private:
  // The branch's head, shallow.
  static void cloneBranch(const JobsetSpec& js, const std::string& dir) {
    std::vector<std::string> clone = {"git", "clone", "--quiet", "--depth",
                                      "1"};
    if (!js.branch.empty()) {
      clone.push_back("--branch");
      clone.push_back(js.branch);
    }
    clone.push_back(js.location);
    clone.push_back(dir);
    auto r = runCommand(clone);
    if (r.exitCode != 0)
      throw Error("jobset '" + js.name + "': git clone of " + js.location +
                  " failed: " + r.err);
  }

  // One commit (the revision, else the ref `branch`, e.g. a pull
  // request's refs/pull/N/head), shallow: servers speaking git's protocol
  // v2 give any reachable commit.
  static void fetchOne(const JobsetSpec& js, const std::string& dir) {
    const std::string& what = js.revision.empty() ? js.branch : js.revision;
    for (const std::vector<std::string>& cmd :
         {std::vector<std::string>{"git", "init", "--quiet", dir},
          {"git", "-C", dir, "fetch", "--quiet", "--depth", "1", "--",
           js.location, what},
          {"git", "-C", dir, "checkout", "--quiet", "FETCH_HEAD"}}) {
      auto r = runCommand(cmd);
      if (r.exitCode != 0)
        throw Error("jobset '" + js.name + "': fetching " + what + " of " +
                    js.location + " failed: " + r.err);
    }
  }
};

}  // namespace

std::unique_ptr<InputFetcher> makeInputFetcher() {
  return std::make_unique<RealInputFetcher>();
}

size_t importFromNixChroot(const std::string& nixRoot,
                           const std::vector<std::string>& paths,
                           store::LocalStore& store) {
  std::string dir = nixRoot + "/nix/store";
  store::StorePathSet candidates;
  for (auto& e : std::filesystem::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n.size() > 33 && n[0] != '.') try {
        candidates.insert(store::StorePath(n));
      } catch (const Error&) {
      }
  }
  // Depth-first, references before referrers.
  std::set<store::StorePath> seen;
  std::vector<store::StorePath> order;
  std::map<store::StorePath, store::StorePathSet> refs;
  std::vector<std::pair<store::StorePath, bool>> stack;
  for (auto& p : paths) stack.push_back({store.parsePath(p), false});
  while (!stack.empty()) {
    auto [p, expanded] = stack.back();
    stack.pop_back();
    if (expanded) {
      order.push_back(p);
      continue;
    }
    if (!seen.insert(p).second || store.isValid(p)) continue;
    std::string phys = dir + "/" + p.baseName();
    store::StorePathSet r;
    if (p.isDerivation()) {
      auto drv = store::readDerivationFile(store.storeDir(), phys);
      r = drv.inputSrcs;
      for (auto& [d, outs] : drv.inputDrvs) r.insert(d);
    } else {
      r = store::hashAndScanPath(phys, candidates).references;
    }
    refs[p] = r;
    stack.push_back({p, true});
    for (auto& q : r)
      if (q != p) stack.push_back({q, false});
  }
  size_t added = 0;
  for (auto& p : order) {
    if (store.isValid(p)) continue;
    StringSink nar;
    store::dumpPath(dir + "/" + p.baseName(), nar);
    store::ValidPathInfo info(p);
    info.narHash = hashString(HashAlgo::kSha256, nar.s);
    info.narSize = nar.s.size();
    info.references = refs[p];
    StringSource src(nar.s);
    store.addFromNar(info, src);
    added++;
  }
  return added;
}

}  // namespace kiln::scheduler
