// Evaluations: job lines, input fingerprints, the nix-instantiate adapter
// and the import from a Nix chroot store (docs/scheduler.md).
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

Job parseJobLine(const std::string& line) {
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
  if (job.drvPath.empty() || job.system.empty())
    throw FormatError("job line for '" + job.attr +
                      "': needs 'drvPath' and 'system' (or 'error')");
  if (j.contains("outputs")) {
    if (!j["outputs"].is_object())
      throw FormatError("job line for '" + job.attr +
                        "': 'outputs' is not an object");
    for (auto& [k, v] : j["outputs"].items())
      if (v.is_string()) job.outputs[k] = v.get<std::string>();
  }
  if (j.contains("meta") && j["meta"].is_object())
    applyMeta(job, j["meta"]);
  return job;
}

void applyMeta(Job& job, const nlohmann::json& meta) {
  auto num = [&](const char* k) -> std::optional<int64_t> {
    auto it = meta.find(k);
    if (it == meta.end() || !it->is_number_integer()) return std::nullopt;
    auto v = it->get<int64_t>();
    if (v < 0)
      throw FormatError("job '" + job.attr + "': meta." + k +
                        " is negative (" + std::to_string(v) + ")");
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
      return {js.location, "sha256:" + h.finish().first.toNix32()};
    }
    std::string dir = workDir + "/checkout";
    if (pathExists(dir)) deletePath(dir);
    createDirs(workDir);
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
    auto rev = runCommand({"git", "-C", dir, "rev-parse", "HEAD"});
    if (rev.exitCode != 0) throw Error("git rev-parse failed: " + rev.err);
    std::string h = rev.out.substr(0, rev.out.find('\n'));
    return {dir, "git:" + h};
  }
};

// Runs nix-instantiate per top-level attribute into a chroot store.
class NixInstantiateRunner final : public EvalRunner {
 public:
  explicit NixInstantiateRunner(std::string workDir)
      : workDir_(std::move(workDir)) {}

  std::vector<Job> evaluate(const JobsetSpec& js, const Checkout& co,
                            const EvalStore& target) override {
    store::LocalStore store(target.stateDir, store::StoreDir(target.storeDir));
    if (store.storeDir().dir() != "/nix/store")
      throw Error("the nix-instantiate adapter needs the logical store "
                  "directory /nix/store, not " + store.storeDir().dir());
    std::string root = workDir_ + "/nix-root";
    createDirs(root);
    std::string file = co.dir + "/" + js.file;
    std::vector<std::string> args = argArgs(js);
    std::string sel = js.attribute.empty() ? "" : "." + js.attribute;
    std::vector<std::string> list = {"nix-instantiate", "--eval", "--json",
                                     "--strict", "-E"};
    list.push_back("{ f, args }: builtins.attrNames ((let v = import f; in "
                   "if builtins.isFunction v then v args else v)" + sel + ")");
    list.insert(list.end(), {"--arg", "f", file, "--arg", "args",
                             argsExpr(js)});
    auto names = runCommand(list);
    if (names.exitCode != 0)
      throw Error("evaluation of " + file + " failed: " + names.err);
    std::vector<std::string> attrNames;
    for (auto& attr : json::parse(names.out))
      attrNames.push_back(attr.get<std::string>());
    auto jobs = instantiateInBatches(
        attrNames, [&](const std::vector<std::string>& batch) {
          return instantiate(js, file, batch, root, args);
        });
    std::vector<std::string> drvs;
    for (auto& j : jobs)
      if (j.error.empty()) drvs.push_back(j.drvPath);
    importFromNixChroot(root, drvs, store);
    for (auto& j : jobs) fillFromDrv(j, store);
    applyMetas(jobs, readMeta(js, file, sel));
    return jobs;
  }

 private:
  static std::string argsExpr(const JobsetSpec& js) {
    std::string e = "{ ";
    const json args = json::parse(js.arguments);
    for (auto& [k, v] : args.items())
      e += k + " = (" + v.get<std::string>() + "); ";
    return e + "}";
  }
  // {attr: {maxSilent, timeout, schedulingPriority}} with the integer meta
  // attributes of each job. Jobs whose meta throws get {}; if the whole
  // query fails (an `abort` somewhere), no job gets meta and a warning is
  // logged.
  static json readMeta(const JobsetSpec& js, const std::string& file,
                       const std::string& sel) {
    std::vector<std::string> cmd = {
        "nix-instantiate", "--eval", "--json", "--strict", "-E",
        "{ f, args }: let v = import f; "
        "s = (if builtins.isFunction v then v args else v)" + sel + "; "
        "pick = m: n: let r = builtins.tryEval (m.${n} or null); in "
        "if r.success && builtins.isInt r.value then { ${n} = r.value; } "
        "else {}; "
        "meta = j: let r = builtins.tryEval (if builtins.isAttrs j && "
        "builtins.isAttrs (j.meta or null) then j.meta else {}); in "
        "if r.success then r.value else {}; "
        "in builtins.mapAttrs (n: j: let m = meta j; in pick m \"maxSilent\" "
        "// pick m \"timeout\" // pick m \"schedulingPriority\") s",
        "--arg", "f", file, "--arg", "args", argsExpr(js)};
    auto r = runCommand(cmd);
    if (r.exitCode == 0) try {
        json j = json::parse(r.out);
        if (j.is_object()) return j;
      } catch (const json::exception&) {
      }
    logWarn("evaluation of " + file + ": cannot read the jobs' meta "
            "(maxSilent, timeout, schedulingPriority keep their defaults): " +
            r.err);
    return json::object();
  }

  // A job with an invalid meta value becomes a per-job error.
  static void applyMetas(std::vector<Job>& jobs, const json& metas) {
    for (auto& job : jobs) {
      auto m = metas.find(job.attr);
      if (m == metas.end() || !job.error.empty()) continue;
      try {
        applyMeta(job, *m);
      } catch (const FormatError& e) {
        job.error = e.what();
        job.drvPath.clear();
      }
    }
  }

  static std::vector<std::string> argArgs(const JobsetSpec& js) {
    std::vector<std::string> out;
    const json args = json::parse(js.arguments);
    for (auto& [k, v] : args.items())
      out.insert(out.end(), {"--arg", k, v.get<std::string>()});
    return out;
  }

  // One nix-instantiate for several attributes; it prints one .drv path
  // per attribute, in order, and fails as a whole if any of them fails.
  BatchOutcome instantiate(const JobsetSpec& js, const std::string& file,
                           const std::vector<std::string>& attrs,
                           const std::string& root,
                           const std::vector<std::string>& args) {
    std::vector<std::string> cmd = {"nix-instantiate", "--store",
                                    "local?root=" + root, file};
    for (auto& a : attrs) {
      cmd.push_back("-A");
      cmd.push_back(js.attribute.empty() ? a : js.attribute + "." + a);
    }
    cmd.insert(cmd.end(), args.begin(), args.end());
    auto r = runCommand(cmd);
    BatchOutcome o;
    std::istringstream lines(r.out);
    for (std::string l; std::getline(lines, l);)
      if (!l.empty()) o.drvPaths.push_back(l);
    o.ok = r.exitCode == 0;
    o.error = r.err.empty() ? "nix-instantiate failed" : r.err;
    return o;
  }

  static void fillFromDrv(Job& job, store::LocalStore& store) {
    if (!job.error.empty()) return;
    auto p = store.parsePath(job.drvPath);
    auto drv = store::readDerivationFile(store.storeDir(),
                                         store.physicalPath(p));
    job.name = drv.name;
    job.system = drv.platform;
    for (auto& [n, o] : drv.outputs)
      if (o.path) job.outputs[n] = store.printPath(*o.path);
  }

  std::string workDir_;
};

}  // namespace

std::vector<Job> instantiateInBatches(
    const std::vector<std::string>& attrs,
    const std::function<BatchOutcome(const std::vector<std::string>&)>& batch,
    size_t maxBatch) {
  std::vector<Job> jobs(attrs.size());
  // Ranges [lo, hi) still to do; a failed range is split in halves.
  std::vector<std::pair<size_t, size_t>> todo;
  maxBatch = std::max<size_t>(maxBatch, 1);
  for (size_t lo = 0; lo < attrs.size(); lo += maxBatch)
    todo.push_back({lo, std::min(attrs.size(), lo + maxBatch)});
  std::reverse(todo.begin(), todo.end());  // popped from the back
  while (!todo.empty()) {
    auto [lo, hi] = todo.back();
    todo.pop_back();
    std::vector<std::string> part(attrs.begin() + lo, attrs.begin() + hi);
    auto o = batch(part);
    // A single attribute may print several paths (a list): the first counts.
    bool whole = o.ok && (o.drvPaths.size() == part.size() ||
                          (part.size() == 1 && !o.drvPaths.empty()));
    if (!whole && hi - lo > 1) {
      size_t mid = lo + (hi - lo) / 2;
      todo.push_back({mid, hi});
      todo.push_back({lo, mid});
      continue;
    }
    for (size_t i = lo; i < hi; i++) {
      jobs[i].attr = attrs[i];
      if (whole)
        jobs[i].drvPath = o.drvPaths[i - lo];
      else
        jobs[i].error = o.ok ? "nix-instantiate printed no .drv path" : o.error;
    }
  }
  return jobs;
}

std::unique_ptr<InputFetcher> makeInputFetcher() {
  return std::make_unique<RealInputFetcher>();
}

std::unique_ptr<EvalRunner> makeNixInstantiateRunner(std::string workDir) {
  return std::make_unique<NixInstantiateRunner>(std::move(workDir));
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
