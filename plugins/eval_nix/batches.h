#pragma once
// Instantiating many attributes with few nix-instantiate runs (the `nix`
// evaluator plugin): one process per batch, a failed batch split in halves
// down to the broken attributes. Pure: the caller supplies the batch call.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace kiln::nix_eval {

/// What one batch of attributes gave: their `.drv` paths in order, or (ok
/// false) the error of the batch as a whole.
struct BatchOutcome {
  bool ok = false;
  std::vector<std::string> drvPaths;
  std::string error;
};

/// One attribute's result: its `.drv` path, or the error that prevented it.
struct BatchJob {
  std::string attr;
  std::string drvPath;  ///< "" when `error` is set
  std::string error;
};

/// Instantiates `attrs` through `batch`, which instantiates several
/// attributes at once (one process for many jobs). Batches hold at most
/// `maxBatch` attributes; a failed batch (or one returning the wrong number
/// of paths) is split in halves down to single attributes, so k broken jobs
/// cost O(k log n) extra calls and every other job still gets its `.drv`.
/// Returns one BatchJob per attribute, in order. Exceptions of `batch`
/// propagate.
std::vector<BatchJob> instantiateInBatches(
    const std::vector<std::string>& attrs,
    const std::function<BatchOutcome(const std::vector<std::string>&)>& batch,
    size_t maxBatch = 1000);

}  // namespace kiln::nix_eval
