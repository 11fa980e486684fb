#include "jobset_usage.h"

#include <algorithm>

namespace kiln::scheduler {

void JobsetUsage::setShares(JobsetId jobset, unsigned shares) {
  jobsets_[jobset].shares = std::max(1u, shares);
}

void JobsetUsage::addRunning(JobsetId jobset, double seconds) {
  State& s = jobsets_[jobset];
  s.running = std::max(0.0, s.running + seconds);
}

void JobsetUsage::addFinished(JobsetId jobset, TimePoint at, double seconds) {
  if (seconds <= 0) return;
  jobsets_[jobset].window += seconds;
  entries_.push_back(Entry{at, jobset, seconds});
}

std::vector<JobsetId> JobsetUsage::expire(TimePoint now) {
  std::vector<JobsetId> changed;
  while (!entries_.empty() && entries_.front().at + window_ <= now) {
    const Entry& e = entries_.front();
    State& s = jobsets_[e.jobset];
    s.window = std::max(0.0, s.window - e.seconds);
    if (changed.empty() || changed.back() != e.jobset)
      changed.push_back(e.jobset);
    entries_.pop_front();
  }
  return changed;
}

double JobsetUsage::fairness(JobsetId jobset) const {
  auto it = jobsets_.find(jobset);
  if (it == jobsets_.end()) return 0;
  return (it->second.window + it->second.running) / it->second.shares;
}

}  // namespace kiln::scheduler
