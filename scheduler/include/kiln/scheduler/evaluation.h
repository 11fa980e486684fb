#pragma once
/// Evaluations (docs/scheduler.md, "Evaluations"): a jobset's inputs are
/// fingerprinted (git revision, or a content hash of a folder); when they
/// changed, an `EvalRunner` turns the collection into jobs whose `.drv`
/// closures end up valid in the central store.
///
/// The job format is the one of `kiln eval FILE --json`: one JSON object per
/// line, `{"attr", "name", "system", "drvPath", "outputs": {name: path},
/// "meta": {...}}` (an aggregate job also has `"constituents": [drvPath,
/// ...]`) or `{"attr", "error"}`.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/common/error.h"
#include "kiln/plugin_host/host_services.h"
#include "kiln/plugin_host/registry.h"
#include "kiln/scheduler/jobset.h"
#include "kiln/scheduler/offline_requests.h"
#include "kiln/store/local_store.h"

namespace kiln::scheduler {

/// Where an evaluator writes the `.drv` closures: the central store, by
/// location (any process or thread may open a LocalStore on it).
struct EvalStore {
  std::string stateDir;
  std::string storeDir = "/nix/store";
};

/// One job of an evaluation, or the error that prevented it.
struct Job {
  std::string attr;
  std::string name;
  std::string system;
  std::string drvPath;  ///< full logical path; "" when `error` is set
  std::map<std::string, std::string> outputs;
  int schedulingPriority = 0;  ///< meta.schedulingPriority
  int64_t maxSilentSec = 3600;  ///< meta.maxSilent (s without log output)
  int64_t timeoutSec = 36000;   ///< meta.timeout (s in total)
  std::string error;           ///< per-job evaluation error
  /// An aggregate job (`_hydraAggregate = true`, `kiln eval
  /// --constituents`): the `.drv` paths of its constituents (at most
  /// kMaxConstituents); the job's build lists theirs.
  std::vector<std::string> constituents;
  bool aggregate = false;
};

/// The most constituents one aggregate job may list.
inline constexpr size_t kMaxConstituents = 100000;

/// Parses one `kiln eval --json` line; throws FormatError naming the
/// problem (not an object, missing attr, neither drvPath nor error...).
/// With `needSystem` false a line may leave out `system` (an evaluator
/// plugin's line, completed from the `.drv`).
Job parseJobLine(const std::string& line, bool needSystem = true);

/// Copies the meta attributes the scheduler uses (schedulingPriority,
/// maxSilent, timeout) from a job's `meta` object into `job`; other or
/// non-integer attributes are ignored. Throws FormatError for a negative
/// maxSilent or timeout.
void applyMeta(Job& job, const nlohmann::json& meta);

/// Where a jobset's collection is, checked out for one evaluation.
struct Checkout {
  std::string dir;         ///< folder holding the collection
  std::string inputsHash;  ///< "git:<rev>" or "sha256:<nix32>" of the folder
  /// The jobset's own work folder (`<state>/eval/<id>`), which an
  /// evaluator may use across evaluations; "" = none.
  std::string workDir;
};

/// Fetches a jobset's inputs. Real implementation: folders are hashed as
/// NARs (`.git` excluded); git locations are cloned at the branch head.
class InputFetcher {
 public:
  virtual ~InputFetcher() = default;
  /// The inputs' fingerprint and a folder with their contents. Throws Error
  /// (e.g. the folder does not exist, git failed).
  virtual Checkout fetch(const JobsetSpec& jobset,
                         const std::string& workDir) = 0;
};

/// The real fetcher (runs `git` for git jobsets).
std::unique_ptr<InputFetcher> makeInputFetcher();

/// Evaluates a checked-out collection into jobs whose `.drv` closures are
/// valid in the central store (`store`) afterwards. Runs on the service's
/// evaluation thread, one evaluation at a time. Failures of single jobs are
/// returned as jobs with `error`; an exception (kiln::Error with the
/// reason) means the whole evaluation failed. The service's runners are
/// the evaluator plugins (PluginEvaluators; the boundary itself never
/// throws); tests pass their own.
class EvalRunner {
 public:
  virtual ~EvalRunner() = default;
  virtual std::vector<Job> evaluate(const JobsetSpec& jobset,
                                    const Checkout& checkout,
                                    const EvalStore& store) = 0;
};

/// The evaluator plugins (docs/plugin-abi.md, "Evaluator table") by name,
/// as runners: each is created on first use from `registry` with its
/// configuration from `configs` (by plugin name; "builtin" gets `kiln`,
/// the executable to run, from the service). Thread-safe.
class PluginEvaluators {
 public:
  /// `registry` (not owned) must outlive this object.
  PluginEvaluators(const plugins::PluginRegistry& registry,
                   std::map<std::string, plugins::PluginConfig> configs);
  ~PluginEvaluators();
  PluginEvaluators(const PluginEvaluators&) = delete;
  PluginEvaluators& operator=(const PluginEvaluators&) = delete;
  /// The runner of evaluator plugin `name`. Throws Error when there is
  /// none (naming the loaded evaluator plugins and any refused library),
  /// when it was built against a minor without `evaluate`, or when its
  /// `create` failed (its message).
  EvalRunner& get(const std::string& name);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// `configs` with the builtin evaluator plugin's `kiln` setting (the
/// executable it runs) filled in from `kilnBinary` ("" = `kiln` on PATH)
/// unless it is set already.
std::map<std::string, plugins::PluginConfig> withBuiltinKiln(
    std::map<std::string, plugins::PluginConfig> configs,
    const std::string& kilnBinary);

/// Throws SchedulerStateError unless `registry` holds an evaluator plugin
/// named `evaluator`; the message names jobset `jobset`, the name and the
/// loaded evaluator plugins (and, like PluginRegistry::require, where they
/// were searched and any refused library).
void checkEvaluatorLoaded(const plugins::PluginRegistry& registry,
                          const std::string& jobset,
                          const std::string& evaluator);

/// checkEvaluatorLoaded against `registry` (not owned; must outlive the
/// check), as the request handlers of the state layer take it
/// (offline_requests.h).
EvaluatorCheck loadedEvaluatorCheck(const plugins::PluginRegistry& registry);

/// Imports `paths` and their closures from a Nix chroot store rooted at
/// `nixRoot` (files under `<nixRoot>/nix/store`) into `store`, references
/// first. Returns how many paths were added. Throws Error on failure.
size_t importFromNixChroot(const std::string& nixRoot,
                           const std::vector<std::string>& paths,
                           store::LocalStore& store);

}  // namespace kiln::scheduler
