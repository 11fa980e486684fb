#pragma once
// The job queue of the direct-upload verifier threads (direct_uploads.h):
// first in, first out, except that a job never runs beside another job of
// its step nor before an earlier one of its step, and a job for every step
// (kAllSteps: the start's sweep of `staging/`) runs alone, after all that
// came before it and before all that comes after it. Not thread-safe: its
// owner locks it.

#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <utility>

namespace kiln::scheduler {

/// Jobs tagged with their step, taken in order per step.
template <typename Job>
class StepOrderedQueue {
 public:
  /// The tag of a job that concerns every step.
  static constexpr int64_t kAllSteps = -1;

  /// Queues `job` of `step` (≥ 0, or kAllSteps).
  void push(int64_t step, Job job) { queue_.emplace_back(step, std::move(job)); }

  /// The first job that may run now, taken off the queue (its step counts
  /// as running until done()); nullopt if none may.
  std::optional<std::pair<int64_t, Job>> take() {
    if (exclusive_) return std::nullopt;
    std::set<int64_t> blocked = running_;
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->first == kAllSteps) {
        // Nothing overtakes it; it waits for what runs and came before.
        if (it != queue_.begin() || !running_.empty()) return std::nullopt;
        exclusive_ = true;
      } else if (!blocked.insert(it->first).second) {
        continue;  // an earlier job of its step runs or waits
      } else {
        running_.insert(it->first);
      }
      auto job = std::move(*it);
      queue_.erase(it);
      return job;
    }
    return std::nullopt;
  }

  /// The job of `step` that take() gave ended.
  void done(int64_t step) {
    if (step == kAllSteps)
      exclusive_ = false;
    else
      running_.erase(step);
  }

  /// Jobs waiting (not those running).
  size_t waiting() const { return queue_.size(); }
  /// Drops every waiting job.
  void clear() { queue_.clear(); }

 private:
  std::deque<std::pair<int64_t, Job>> queue_;
  std::set<int64_t> running_;  ///< steps with a job running
  bool exclusive_ = false;     ///< a kAllSteps job runs
};

}  // namespace kiln::scheduler
