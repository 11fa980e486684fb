#include "kiln/common/status.h"

#include <array>
#include <utility>

namespace kiln {
namespace {

constexpr std::array<std::pair<StepStatus, std::string_view>, 15> kNames{{
    {StepStatus::kSuccess, "success"},
    {StepStatus::kFailed, "failed"},
    {StepStatus::kDepFailed, "dependency-failed"},
    {StepStatus::kAborted, "aborted"},
    {StepStatus::kCancelled, "cancelled"},
    {StepStatus::kFailedWithOutput, "failed-with-output"},
    {StepStatus::kTimedOut, "timed-out"},
    {StepStatus::kCachedFailure, "cached-failure"},
    {StepStatus::kUnsupported, "unsupported"},
    {StepStatus::kLogLimitExceeded, "log-limit-exceeded"},
    {StepStatus::kOutputLimitExceeded, "output-limit-exceeded"},
    {StepStatus::kNotDeterministic, "not-deterministic"},
    {StepStatus::kOutOfMemory, "out-of-memory"},
    {StepStatus::kProcessLimitExceeded, "process-limit-exceeded"},
    {StepStatus::kDiskLimitExceeded, "disk-limit-exceeded"},
}};

}  // namespace

bool isValidStepStatus(uint8_t s) { return s <= 15 && s != 5; }

std::string_view stepStatusName(StepStatus status) {
  for (auto& [s, n] : kNames)
    if (s == status) return n;
  return "unknown";
}

std::optional<StepStatus> stepStatusFromName(std::string_view name) {
  for (auto& [s, n] : kNames)
    if (n == name) return s;
  return std::nullopt;
}

}  // namespace kiln
