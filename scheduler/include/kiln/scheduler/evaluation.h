#pragma once
/// Evaluations (docs/scheduler.md, "Evaluations"): a jobset's inputs are
/// fingerprinted (git revision, or a content hash of a folder); when they
/// changed, an `EvalRunner` turns the collection into jobs whose `.drv`
/// closures end up valid in the central store.
///
/// The job format is the one of `kiln eval FILE --json`: one JSON object per
/// line, `{"attr", "name", "system", "drvPath", "outputs": {name: path},
/// "meta": {...}}` or `{"attr", "error"}`.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/common/error.h"
#include "kiln/scheduler/jobset.h"
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
};

/// Parses one `kiln eval --json` line; throws FormatError naming the
/// problem (not an object, missing attr, neither drvPath nor error...).
Job parseJobLine(const std::string& line);

/// Copies the meta attributes the scheduler uses (schedulingPriority,
/// maxSilent, timeout) from a job's `meta` object into `job`; other or
/// non-integer attributes are ignored. Throws FormatError for a negative
/// maxSilent or timeout.
void applyMeta(Job& job, const nlohmann::json& meta);

/// Where a jobset's collection is, checked out for one evaluation.
struct Checkout {
  std::string dir;         ///< folder holding the collection
  std::string inputsHash;  ///< "git:<rev>" or "sha256:<nix32>" of the folder
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
/// reason) means the whole evaluation failed. An evaluator plugin is one
/// implementation (the plugin boundary itself must not throw).
class EvalRunner {
 public:
  virtual ~EvalRunner() = default;
  virtual std::vector<Job> evaluate(const JobsetSpec& jobset,
                                    const Checkout& checkout,
                                    const EvalStore& store) = 0;
};

/// What one batch of attributes gave: their `.drv` paths in order, or (ok
/// false) the error of the batch as a whole.
struct BatchOutcome {
  bool ok = false;
  std::vector<std::string> drvPaths;
  std::string error;
};

/// Instantiates `attrs` through `batch`, which instantiates several
/// attributes at once (one process for many jobs). Batches hold at most
/// `maxBatch` attributes; a failed batch (or one returning the wrong number
/// of paths) is split in halves down to single attributes, so k broken jobs
/// cost O(k log n) extra calls and every other job still gets its `.drv`.
/// Returns one Job (attr + drvPath, or attr + error) per attribute, in order.
std::vector<Job> instantiateInBatches(
    const std::vector<std::string>& attrs,
    const std::function<BatchOutcome(const std::vector<std::string>&)>& batch,
    size_t maxBatch = 1000);

/// The "builtin" evaluator's runner: runs `<kilnBinary> eval FILE --json [-A
/// attribute]
/// [--arg NAME EXPR]...` in the checkout, writing the `.drv` closures
/// straight into `store`'s state directory (several processes may share a
/// LocalStore). Per-job errors come back as jobs with `error`; a failing
/// `kiln eval` (unparsable collection, missing file...) throws Error with
/// its stderr. Job names are relative to the jobset's attribute.
std::unique_ptr<EvalRunner> makeKilnEvalRunner(std::string kilnBinary);

/// The nix-instantiate adapter (a jobset's "nix" evaluator, e.g. to
/// compare with Nix or for what kiln's evaluator lacks): lists the attributes
/// with `nix-instantiate --eval`, instantiates them in batches
/// (`instantiateInBatches`) with
/// `nix-instantiate --store local?root=<workDir>/nix-root`, then imports the
/// `.drv` closures (NAR-verified) from that chroot store into `store`.
/// Requires a logical store directory of /nix/store.
std::unique_ptr<EvalRunner> makeNixInstantiateRunner(std::string workDir);

/// Imports `paths` and their closures from a Nix chroot store rooted at
/// `nixRoot` (files under `<nixRoot>/nix/store`) into `store`, references
/// first. Returns how many paths were added. Throws Error on failure.
size_t importFromNixChroot(const std::string& nixRoot,
                           const std::vector<std::string>& paths,
                           store::LocalStore& store);

}  // namespace kiln::scheduler
