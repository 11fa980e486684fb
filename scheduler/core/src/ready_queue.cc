#include "ready_queue.h"

#include <algorithm>
#include <tuple>

namespace kiln::scheduler {

bool stepBefore(const StepKey& a, const StepKey& b) {
  return std::tie(b.global, b.criticalPath, b.local, a.createdMs, a.step) <
         std::tie(a.global, a.criticalPath, a.local, b.createdMs, b.step);
}

bool headBefore(const HeadKey& a, const HeadKey& b) {
  if (a.head.global != b.head.global) return a.head.global > b.head.global;
  if (a.fairness != b.fairness) return a.fairness < b.fairness;
  if (!(a.head == b.head)) return stepBefore(a.head, b.head);
  return a.jobset < b.jobset;
}

uint32_t ReadyQueues::addClass() {
  classes_.emplace_back();
  return static_cast<uint32_t>(classes_.size() - 1);
}

// Re-inserts the jobset's head after its sub-queue changed. `had` says
// whether `sub.head` is currently in `c.heads`.
void ReadyQueues::refreshHead(ClassQueue& c, SubQueue& sub, JobsetId jobset,
                              bool had) {
  if (had) {
    if (!sub.steps.empty() && *sub.steps.begin() == sub.head.head) return;
    c.heads.erase(sub.head);
  }
  if (sub.steps.empty()) return;
  sub.head = HeadKey{*sub.steps.begin(), jobsets_[jobset].fairness, jobset};
  c.heads.insert(sub.head);
}

void ReadyQueues::insert(uint32_t cls, JobsetId jobset, const StepKey& key) {
  ClassQueue& c = classes_[cls];
  auto [it, fresh] = c.subs.try_emplace(jobset);
  SubQueue& sub = it->second;
  if (fresh) jobsets_[jobset].classes.push_back(cls);
  sub.steps.insert(key);
  ++c.size;
  refreshHead(c, sub, jobset, !fresh);
}

void ReadyQueues::erase(uint32_t cls, JobsetId jobset, const StepKey& key) {
  ClassQueue& c = classes_[cls];
  auto it = c.subs.find(jobset);
  if (it == c.subs.end() || it->second.steps.erase(key) == 0) return;
  --c.size;
  refreshHead(c, it->second, jobset, true);
  if (it->second.steps.empty()) {
    c.subs.erase(it);
    auto& list = jobsets_[jobset].classes;
    list.erase(std::find(list.begin(), list.end(), cls));
  }
}

void ReadyQueues::setFairness(JobsetId jobset, double fairness) {
  JobsetState& js = jobsets_[jobset];
  if (js.fairness == fairness) return;
  js.fairness = fairness;
  for (uint32_t cls : js.classes) {
    ClassQueue& c = classes_[cls];
    SubQueue& sub = c.subs.at(jobset);
    c.heads.erase(sub.head);
    sub.head.fairness = fairness;
    c.heads.insert(sub.head);
  }
}

std::optional<HeadKey> ReadyQueues::best(uint32_t cls) const {
  const ClassQueue& c = classes_[cls];
  if (c.heads.empty()) return std::nullopt;
  return *c.heads.begin();
}

}  // namespace kiln::scheduler
