#pragma once
// Jobset fairness accounting: build seconds finished inside a sliding
// window plus the expected seconds of steps running now, divided by the
// jobset's scheduling shares. Every finished attempt is one window entry,
// expired once: O(1) amortised per step.

#include <deque>
#include <unordered_map>
#include <vector>

#include "kiln/scheduler/types.h"

namespace kiln::scheduler {

class JobsetUsage {
 public:
  explicit JobsetUsage(Duration window) : window_(window) {}

  /// Sets shares (>= 1).
  void setShares(JobsetId jobset, unsigned shares);
  /// Adds (or with a negative value removes) a running estimate.
  void addRunning(JobsetId jobset, double seconds);
  /// Records `seconds` of build time finished at `at`.
  void addFinished(JobsetId jobset, TimePoint at, double seconds);
  /// Drops entries older than the window; returns the jobsets that changed.
  std::vector<JobsetId> expire(TimePoint now);
  /// (window seconds + running seconds) / shares.
  double fairness(JobsetId jobset) const;

 private:
  struct Entry {
    TimePoint at;
    JobsetId jobset;
    double seconds;
  };
  struct State {
    unsigned shares = 1;
    double window = 0;
    double running = 0;
  };
  Duration window_;
  std::deque<Entry> entries_;
  std::unordered_map<JobsetId, State> jobsets_;
};

}  // namespace kiln::scheduler
