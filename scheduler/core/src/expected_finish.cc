// Expected finish of an evaluation (expected_finish.h).
#include "kiln/scheduler/expected_finish.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace kiln::scheduler {

namespace {

bool validSeconds(double s) { return std::isfinite(s) && s >= 0; }

// The expected seconds left of each step.
std::vector<double> leftOf(
    const std::vector<RemainingStep>& steps,
    const std::unordered_map<std::string, double>& history, double defaultSec) {
  std::vector<double> left(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    auto it = history.find(steps[i].pname);
    double expected = it != history.end() ? it->second : defaultSec;
    if (!validSeconds(expected) || !validSeconds(steps[i].elapsedSec))
      throw std::invalid_argument("expected finish: bad duration");
    left[i] = steps[i].running ? std::max(0.0, expected - steps[i].elapsedSec)
                               : expected;
  }
  return left;
}

// Steps in an order where each comes after its dependencies (Kahn's);
// throws on a bad index or a cycle.
std::vector<size_t> dependenciesFirst(const std::vector<RemainingStep>& steps) {
  size_t n = steps.size();
  std::vector<size_t> pending(n);
  std::vector<std::vector<size_t>> dependents(n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t d : steps[i].deps) {
      if (d >= n || d == i)
        throw std::invalid_argument("expected finish: bad dependency");
      dependents[d].push_back(i);
    }
    pending[i] = steps[i].deps.size();
  }
  std::vector<size_t> order;
  order.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) order.push_back(i);
  for (size_t at = 0; at < order.size(); ++at)
    for (size_t r : dependents[order[at]])
      if (--pending[r] == 0) order.push_back(r);
  if (order.size() != n)
    throw std::invalid_argument("expected finish: dependency cycle");
  return order;
}

}  // namespace

FinishEstimate estimateFinish(
    const std::vector<RemainingStep>& steps,
    const std::unordered_map<std::string, double>& history, unsigned slots,
    double defaultSec) {
  if (slots == 0) throw std::invalid_argument("expected finish: no slot");
  std::vector<double> left = leftOf(steps, history, defaultSec);
  std::vector<double> endAt(steps.size(), 0);  // longest chain ending here
  FinishEstimate e;
  for (size_t i : dependenciesFirst(steps)) {
    double start = 0;
    for (size_t d : steps[i].deps) start = std::max(start, endAt[d]);
    endAt[i] = start + left[i];
    e.criticalPathSec = std::max(e.criticalPathSec, endAt[i]);
    e.totalWorkSec += left[i];
  }
  e.seconds = std::max(e.criticalPathSec, e.totalWorkSec / slots);
  return e;
}

EstimateError estimateError(int64_t madeAtMs, int64_t estimatedMs,
                            int64_t actualMs) {
  EstimateError r;
  r.errorMs = actualMs - estimatedMs;
  int64_t ahead = estimatedMs - madeAtMs;
  if (ahead > 0)
    r.percent = 100.0 * static_cast<double>(std::llabs(r.errorMs)) /
                static_cast<double>(ahead);
  else
    r.percent = r.errorMs == 0 ? 0 : 100;
  return r;
}

}  // namespace kiln::scheduler
