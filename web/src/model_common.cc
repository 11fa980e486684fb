// Pieces every page model shares (model.h): status names and labels, rows
// as JSON, comparison categories, the metrics history.
#include <algorithm>

#include "kiln/common/status.h"
#include "kiln/web/model.h"

namespace kiln::web {

std::string statusLabel(int status) {
  if (status < 0) return "Queued";
  if (status > 255 || !isValidStepStatus(uint8_t(status))) return "Unknown";
  switch (StepStatus(status)) {
    case StepStatus::kSuccess: return "Succeeded";
    case StepStatus::kFailed: return "Failed";
    case StepStatus::kDepFailed: return "Dependency failed";
    case StepStatus::kAborted: return "Aborted";
    case StepStatus::kCancelled: return "Cancelled";
    case StepStatus::kFailedWithOutput: return "Failed with output";
    case StepStatus::kTimedOut: return "Timed out";
    case StepStatus::kCachedFailure: return "Cached failure";
    case StepStatus::kUnsupported: return "Unsupported system type";
    case StepStatus::kLogLimitExceeded: return "Log limit exceeded";
    case StepStatus::kOutputLimitExceeded: return "Output limit exceeded";
    case StepStatus::kNotDeterministic: return "Non-deterministic build";
    case StepStatus::kOutOfMemory: return "Out of memory";
    case StepStatus::kProcessLimitExceeded: return "Process limit exceeded";
    case StepStatus::kDiskLimitExceeded: return "Disk limit exceeded";
  }
  return "Unknown";
}

std::string statusName(int status) {
  if (status < 0) return "queued";
  if (status > 255 || !isValidStepStatus(uint8_t(status))) return "unknown";
  return std::string(stepStatusName(StepStatus(status)));
}

namespace {

json statusJson(bool finished, int status) {
  int s = finished ? status : -1;
  return {{"status", s < 0 ? json(nullptr) : json(s)},
          {"statusName", statusName(s)},
          {"statusLabel", statusLabel(s)}};
}

}  // namespace

json buildJson(const scheduler::BuildRow& b) {
  json j = {{"id", b.id},
            {"eval", b.eval},
            {"jobsetId", b.jobset},
            {"job", b.job},
            {"nixName", b.nixName},
            {"system", b.system},
            {"drvPath", b.drvPath},
            {"finished", b.finished},
            {"globalPriority", b.globalPriority},
            {"localPriority", b.localPriority},
            {"createdMs", b.createdMs},
            {"stopMs", b.stopMs},
            {"error", b.error},
            {"reusedFrom", b.reusedFrom}};
  j.update(statusJson(b.finished, b.status));
  return j;
}

json stepJson(const scheduler::StepRow& s) {
  json j = {{"id", s.id},
            {"drvPath", s.drvPath},
            {"system", s.system},
            {"pname", s.pname},
            {"features", s.features},
            {"finished", s.finished},
            {"error", s.error},
            {"attempts", s.attempts},
            {"worker", s.worker},
            {"createdMs", s.createdMs},
            {"startMs", s.startMs},
            {"stopMs", s.stopMs},
            {"peakMemoryBytes", s.peakMemoryBytes},
            {"cpuTimeUs", s.cpuTimeUs},
            {"buildDirBytes", s.buildDirBytes}};
  j["durationMs"] = s.startMs && s.stopMs >= s.startMs
                        ? json(s.stopMs - s.startMs)
                        : json(nullptr);
  j.update(statusJson(s.finished, s.status));
  return j;
}

namespace {

constexpr std::pair<scheduler::ChangeKind, const char*> kKindNames[] = {
    {scheduler::ChangeKind::kNewlyFailing, "newly-failing"},
    {scheduler::ChangeKind::kNewlySucceeding, "newly-succeeding"},
    {scheduler::ChangeKind::kStillFailing, "still-failing"},
    {scheduler::ChangeKind::kNewJob, "new"},
    {scheduler::ChangeKind::kRemovedJob, "removed"},
    {scheduler::ChangeKind::kUnfinished, "unfinished"},
    {scheduler::ChangeKind::kChanged, "changed"},
};

}  // namespace

std::optional<scheduler::ChangeKind> changeKindFromName(
    const std::string& name) {
  for (auto& [kind, n] : kKindNames)
    if (name == n) return kind;
  return std::nullopt;
}

std::string changeKindName(scheduler::ChangeKind kind) {
  for (auto& [k, n] : kKindNames)
    if (k == kind) return n;
  return "unknown";
}

void MetricsHistory::record(const scheduler::SchedulerSnapshot& snap) {
  if (snap.takenMs == 0) return;
  std::lock_guard lock(mu_);
  if (!samples_.empty() && snap.takenMs - samples_.back().atMs < minIntervalMs_)
    return;
  samples_.push_back({snap.takenMs, snap.dispatches, snap.dispatchLatencySum,
                      snap.metrics.idleSlotSeconds});
  if (samples_.size() > capacity_)
    samples_.erase(samples_.begin(),
                   samples_.begin() + long(samples_.size() - capacity_));
}

json MetricsHistory::series() const {
  std::lock_guard lock(mu_);
  json out = json::array();
  for (size_t i = 1; i < samples_.size(); ++i) {
    const Sample& a = samples_[i - 1];
    const Sample& b = samples_[i];
    // A restarted scheduler starts its counters again: skip that interval.
    if (b.dispatches < a.dispatches || b.idleSlotSeconds < a.idleSlotSeconds)
      continue;
    uint64_t n = b.dispatches - a.dispatches;
    out.push_back(
        {{"atMs", b.atMs},
         {"dispatchLatencyMs",
          n ? json((b.latencySum - a.latencySum) * 1000.0 / double(n))
            : json(nullptr)},
         {"idleSlotSeconds", b.idleSlotSeconds - a.idleSlotSeconds}});
  }
  return out;
}

}  // namespace kiln::web
