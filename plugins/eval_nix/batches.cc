#include "batches.h"

#include <algorithm>
#include <utility>

namespace kiln::nix_eval {

std::vector<BatchJob> instantiateInBatches(
    const std::vector<std::string>& attrs,
    const std::function<BatchOutcome(const std::vector<std::string>&)>& batch,
    size_t maxBatch) {
  std::vector<BatchJob> jobs(attrs.size());
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

}  // namespace kiln::nix_eval
