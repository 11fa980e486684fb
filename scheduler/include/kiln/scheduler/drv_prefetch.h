#pragma once
/// Reading an evaluation's derivations off the service thread
/// (docs/scheduler.md, "The service loop"): the evaluation thread parses
/// every `.drv` of the jobs' closures and orders the jobs dependencies
/// first, so that ingesting a build on the service thread reads no file and
/// adds few new steps (its dependencies came with earlier builds).

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/scheduler/evaluation.h"
#include "kiln/store/derivation.h"
#include "kiln/store/local_store.h"

namespace kiln::scheduler {

/// Parsed derivations by full logical `.drv` path. Immutable once built:
/// shared between the evaluation thread and the service thread.
using DrvMap =
    std::unordered_map<std::string, std::shared_ptr<const store::Derivation>>;

/// Reads the `.drv` `path` of `store` and checks it as the store checks a
/// `.drv` it registers (store::checkDerivationFile: the path pins its bytes
/// and references, and its outputs are the ones its contents imply), with
/// its input derivations hashed through `cache` (memoised there). A `.drv`
/// registered before that check existed, or by a tool that skips it, gets
/// no step. Throws store::InvalidPathError if `path` is not valid, and
/// FormatError naming the `.drv` and the output it claims (and the one it
/// should have) if the check fails.
store::Derivation readCheckedDrv(store::LocalStore& store,
                                 store::DrvHashCache& cache,
                                 const store::StorePath& path);

/// Parses and checks (readCheckedDrv) the closure of `roots` (full `.drv`
/// paths) from `store`. A `.drv` that is not valid, does not parse or fails
/// the check is left out (ingestion then reports it with its own error).
/// One found in `checked` (derivations valid in `store` that were checked
/// as readCheckedDrv checks them, e.g. by the store batch that added them)
/// is taken from there. Never throws for a bad derivation.
std::shared_ptr<const DrvMap> prefetchDrvs(
    store::LocalStore& store, const std::vector<std::string>& roots,
    const DrvMap* checked = nullptr);

/// Stable-sorts `jobs` by the depth of their derivation in `drvs` (a job
/// whose derivation is not in `drvs`, or a failed job, counts as depth 0),
/// so a job comes after every job its derivation depends on.
void orderJobsByDepth(std::vector<Job>& jobs, const DrvMap& drvs,
                      const store::StoreDir& dir);

}  // namespace kiln::scheduler
