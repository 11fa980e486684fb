#pragma once
// Ready queues of the policy core, one per step class (system type plus
// required features). Inside a class, one sub-queue per jobset ordered by
// (global priority desc, critical path desc, local priority desc, age asc),
// and a small ordered set over the jobsets' heads that adds the jobset's
// fairness after the global priority. A change of a jobset's fairness
// re-keys only that jobset's heads: O(classes-of-jobset * log jobsets).

#include <cstdint>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "kiln/scheduler/types.h"

namespace kiln::scheduler {

/// Order key of a queued step; `step` (the slot index) breaks ties.
struct StepKey {
  int global = 0;
  double criticalPath = 0;
  int local = 0;
  int64_t createdMs = 0;
  uint32_t step = 0;
  friend bool operator==(const StepKey&, const StepKey&) = default;
};

/// True if `a` is served before `b` within one jobset.
bool stepBefore(const StepKey& a, const StepKey& b);

/// A jobset's best step in one class together with the jobset's fairness.
struct HeadKey {
  StepKey head;
  double fairness = 0;
  JobsetId jobset = 0;
};

/// True if head `a` is served before head `b` (also across classes).
bool headBefore(const HeadKey& a, const HeadKey& b);

class ReadyQueues {
 public:
  /// Adds an empty class; returns its index.
  uint32_t addClass();
  /// Queues a step of `jobset` in `cls`. O(log n + log jobsets).
  void insert(uint32_t cls, JobsetId jobset, const StepKey& key);
  /// Removes a queued step (same arguments as its insert).
  void erase(uint32_t cls, JobsetId jobset, const StepKey& key);
  /// Sets a jobset's fairness value, re-keying its heads in every class.
  void setFairness(JobsetId jobset, double fairness);
  /// The next step of a class, if any.
  std::optional<HeadKey> best(uint32_t cls) const;
  /// Steps queued in a class.
  size_t size(uint32_t cls) const { return classes_[cls].size; }

 private:
  struct StepLess {
    bool operator()(const StepKey& a, const StepKey& b) const {
      return stepBefore(a, b);
    }
  };
  struct HeadLess {
    bool operator()(const HeadKey& a, const HeadKey& b) const {
      return headBefore(a, b);
    }
  };
  struct SubQueue {
    std::set<StepKey, StepLess> steps;
    HeadKey head;  // as inserted into the class's `heads`
  };
  struct ClassQueue {
    std::unordered_map<JobsetId, SubQueue> subs;
    std::set<HeadKey, HeadLess> heads;
    size_t size = 0;
  };
  struct JobsetState {
    double fairness = 0;
    std::vector<uint32_t> classes;  // classes with a non-empty sub-queue
  };

  void refreshHead(ClassQueue& c, SubQueue& sub, JobsetId jobset, bool had);

  std::vector<ClassQueue> classes_;
  std::unordered_map<JobsetId, JobsetState> jobsets_;
};

}  // namespace kiln::scheduler
