// The `nix` evaluator plugin (docs/plugin-abi.md, docs/scheduler.md
// "Evaluations"): the real `nix-instantiate` for what kiln's own evaluator
// lacks, or to compare with it. It lists the jobs with `nix-instantiate
// --eval`, instantiates them in batches into a Nix chroot store under the
// jobset's work folder, has the host import the `.drv` closures into the
// central store, and reports each job with its integer meta attributes.
// Restricted as the builtin evaluator is (a jobset is untrusted code):
// every nix-instantiate runs with restrict-eval (files only inside the
// checkout and the NIX_PATH entries), no URI allowed to fetchers, no
// import from derivation, no builtins.exec, in a clean environment.
#include <sys/stat.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "batches.h"
#include "kiln/plugin/plugin.hpp"
#include "run_capture.h"

namespace {

using kiln::plugin::Failure;
using kiln::plugin_support::cleanEnvironment;
using kiln::plugin_support::runCapture;
using kiln::plugin_support::tailOf;
using nlohmann::json;

/// The request's fields the commands need, as strings.
struct Evaluation {
  std::string file;
  std::string select;                ///< ".attribute" or ""
  std::string argsExpr;              ///< "{ name = (expr); ... }"
  std::vector<std::string> argArgs;  ///< --arg name expr ...
  std::string attribute;
  std::string root;  ///< the Nix chroot store's root
  /// The options every nix-instantiate gets: restricted evaluation with
  /// the checkout as the one extra allowed path.
  std::vector<std::string> restrictArgs;
  /// Its environment: only what Nix needs to find its store and search
  /// path (getEnv gives "" in restricted mode anyway; this keeps the
  /// scheduler's secrets out of reach of anything Nix might run).
  std::vector<std::string> env;
};

/// Restricted evaluation, as Hydra evaluates jobsets and as the builtin
/// evaluator's `kiln eval --restrict-eval`: options given on the command
/// line override the host's nix.conf and NIX_CONFIG (which the clean
/// environment drops too).
std::vector<std::string> restrictionOf(const kiln_eval_request& req) {
  return {"--option", "restrict-eval", "true",
          "--option", "pure-eval", "false",
          "--option", "allowed-uris", "",
          "--option", "allow-import-from-derivation", "false",
          "--option", "allow-unsafe-native-code-during-evaluation", "false",
          "-I", std::string("kiln-jobset-checkout=") + req.collection_dir};
}

/// What nix-instantiate may see of the scheduler's environment.
std::vector<std::string> environmentOf(const kiln_eval_request& req) {
  return cleanEnvironment(
      {"PATH", "NIX_PATH", "NIX_REMOTE", "NIX_STORE_DIR", "NIX_STATE_DIR",
       "NIX_CONF_DIR", "NIX_LOG_DIR", "TMPDIR", "LANG", "LC_ALL", "TZ"},
      {std::string("HOME=") + req.work_dir});
}

Evaluation evaluationOf(const kiln_eval_request& req) {
  Evaluation e;
  e.file = req.file;
  e.attribute = req.attribute;
  e.select = e.attribute.empty() ? "" : "." + e.attribute;
  e.argsExpr = "{ ";
  for (size_t i = 0; req.arg_names[i]; i++) {
    e.argsExpr +=
        std::string(req.arg_names[i]) + " = (" + req.arg_exprs[i] + "); ";
    e.argArgs.insert(e.argArgs.end(),
                     {"--arg", req.arg_names[i], req.arg_exprs[i]});
  }
  e.argsExpr += "}";
  e.root = std::string(req.work_dir) + "/nix-root";
  e.restrictArgs = restrictionOf(req);
  e.env = environmentOf(req);
  return e;
}

// nix-instantiate with `args`, restricted, in the clean environment.
kiln::plugin_support::CaptureResult nixInstantiate(
    const Evaluation& e, std::vector<std::string> args) {
  args.insert(args.begin(), e.restrictArgs.begin(), e.restrictArgs.end());
  args.insert(args.begin(), "nix-instantiate");
  return runCapture(args, "", size_t{256} << 20, &e.env);
}

// The jobs' names: the attributes of the (selected) collection.
std::vector<std::string> listJobs(const Evaluation& e) {
  auto r = nixInstantiate(
      e, {"--eval", "--json", "--strict", "-E",
          "{ f, args }: builtins.attrNames ((let v = import (/. + f); in "
          "if builtins.isFunction v then v args else v)" +
              e.select + ")",
          "--argstr", "f", e.file, "--arg", "args", e.argsExpr});
  if (r.exitCode != 0)
    throw Failure(KILN_ERR_FAILED,
                  "evaluation of " + e.file + " failed: " + tailOf(r.err));
  std::vector<std::string> names;
  try {
    for (auto& attr : json::parse(r.out))
      names.push_back(attr.get<std::string>());
  } catch (const json::exception& ex) {
    throw Failure(KILN_ERR_FAILED, "nix-instantiate listed the jobs of " +
                                       e.file +
                                       " as no list of names: " + ex.what());
  }
  return names;
}

// One nix-instantiate for several attributes; it prints one .drv path per
// attribute, in order, and fails as a whole if any of them fails.
kiln::nix_eval::BatchOutcome instantiate(
    const Evaluation& e, const std::vector<std::string>& attrs) {
  std::vector<std::string> cmd = {"--store", "local?root=" + e.root, e.file};
  for (auto& a : attrs)
    cmd.insert(cmd.end(),
               {"-A", e.attribute.empty() ? a : e.attribute + "." + a});
  cmd.insert(cmd.end(), e.argArgs.begin(), e.argArgs.end());
  auto r = nixInstantiate(e, cmd);
  kiln::nix_eval::BatchOutcome o;
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);)
    if (!l.empty()) o.drvPaths.push_back(l);
  o.ok = r.exitCode == 0;
  o.error = r.err.empty() ? "nix-instantiate failed" : tailOf(r.err);
  return o;
}

// {attr: {maxSilent, timeout, schedulingPriority}} with each job's integer
// meta attributes; a job whose meta throws gets {}. If the whole query
// fails (an `abort` somewhere), no job gets meta and a warning is logged.
json readMeta(const Evaluation& e, const kiln::plugin::Host& host) {
  auto r = nixInstantiate(
      e,
      {"--eval", "--json", "--strict", "-E",
       "{ f, args }: let v = import (/. + f); "
       "s = (if builtins.isFunction v then v args else v)" +
           e.select +
           "; "
           "pick = m: n: let r = builtins.tryEval (m.${n} or null); in "
           "if r.success && builtins.isInt r.value then { ${n} = r.value; } "
           "else {}; "
           "meta = j: let r = builtins.tryEval (if builtins.isAttrs j && "
           "builtins.isAttrs (j.meta or null) then j.meta else {}); in "
           "if r.success then r.value else {}; "
           "in builtins.mapAttrs (n: j: let m = meta j; in pick m "
           "\"maxSilent\" // pick m \"timeout\" // pick m "
           "\"schedulingPriority\") s",
       "--argstr", "f", e.file, "--arg", "args", e.argsExpr});
  if (r.exitCode == 0) try {
      json j = json::parse(r.out);
      if (j.is_object()) return j;
    } catch (const json::exception&) {
    }
  host.log(KILN_LOG_WARN, "evaluation of " + e.file +
                              ": cannot read the jobs' meta (maxSilent, "
                              "timeout, schedulingPriority keep their "
                              "defaults): " +
                              tailOf(r.err, 1000));
  return json::object();
}

class NixEvaluator {
 public:
  explicit NixEvaluator(kiln::plugin::Host host) : host_(host) {}

  void evaluate(const kiln_eval_request& req, kiln::plugin::EvalSink& sink) {
    if (std::string(req.store_dir) != "/nix/store")
      throw Failure(KILN_ERR_UNSUPPORTED,
                    std::string("the nix evaluator needs the logical store "
                                "directory /nix/store, not ") +
                        req.store_dir);
    Evaluation e = evaluationOf(req);
    if (mkdir(e.root.c_str(), 0755) != 0 && errno != EEXIST)
      throw Failure::sys("creating " + e.root);
    auto jobs = kiln::nix_eval::instantiateInBatches(
        listJobs(e), [&](const std::vector<std::string>& part) {
          return instantiate(e, part);
        });
    std::vector<std::string> drvs;
    for (auto& j : jobs)
      if (j.error.empty()) drvs.push_back(j.drvPath);
    if (!drvs.empty()) sink.importNixStore(e.root, drvs);
    json metas = readMeta(e, host_);
    for (auto& j : jobs) {
      json line = {{"attr", j.attr}};
      if (!j.error.empty()) {
        line["error"] = j.error;
      } else {
        line["drvPath"] = j.drvPath;
        if (auto m = metas.find(j.attr); m != metas.end()) line["meta"] = *m;
      }
      sink.job(line.dump());
      host_.metricAdd("jobs_total", 1);
    }
  }

 private:
  kiln::plugin::Host host_;
};

}  // namespace

KILN_EVALUATOR_PLUGIN(NixEvaluator, "nix", "1.0.0",
                      "the real nix-instantiate, .drv closures imported")
