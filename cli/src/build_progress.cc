#include "build_progress.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <sstream>

#include "kiln/common/file.h"
#include "kiln/common/status.h"
#include "kiln/scheduler/logs.h"

namespace kiln::cli {

namespace {

constexpr int kLogLines = 25;
constexpr auto kPoll = std::chrono::milliseconds(100);

/// The last `n` lines of `text`.
std::string tail(const std::string& text, int n) {
  size_t at = text.size();
  if (at > 0 && text[at - 1] == '\n') --at;
  for (int i = 0; i < n && at != std::string::npos && at > 0; ++i)
    at = text.rfind('\n', at - 1);
  return at == std::string::npos || at == 0 ? text : text.substr(at + 1);
}

/// "kwc-1.0" from a .drv path.
std::string stepName(const std::string& drvPath) {
  std::string base = baseNameOf(drvPath);
  if (base.size() > 33) base = base.substr(33);
  if (base.size() > 4 && base.substr(base.size() - 4) == ".drv")
    base.resize(base.size() - 4);
  return base;
}

}  // namespace

std::string BuildOutcome::report(const std::string& stateDir) const {
  std::ostringstream out;
  for (auto& s : failedSteps) {
    out << "error: builder for '" << s.drvPath << "' failed"
        << (s.error.empty() ? "" : ": " + s.error) << "\n";
    auto logs = scheduler::stepLogFiles(stateDir, s.drvPath, s.attempts);
    if (logs.empty()) continue;
    out << "last " << kLogLines << " log lines:\n"
        << tail(readFile(logs.back().second), kLogLines) << "\n"
        << "(whole log: kiln log --state-dir " << stateDir << " " << s.drvPath
        << ")\n";
  }
  for (auto& j : failedJobs) out << "error: " << j << " was not built\n";
  if (!stoppedBecause.empty()) out << "kiln build: " << stoppedBecause << "\n";
  return out.str();
}

BuildProgress::BuildProgress(LocalFarm& farm, std::vector<BuildTarget> targets,
                             bool keepGoing, bool tty, const Clock& clock)
    : farm_(farm),
      targets_(std::move(targets)),
      keepGoing_(keepGoing),
      tty_(tty),
      clock_(clock) {}

void BuildProgress::submit() {
  int64_t jobset = farm_.jobset();
  std::map<std::string, int64_t> byDrv;
  for (auto& t : targets_) {
    if (byDrv.count(t.drvPath)) continue;
    int64_t id = farm_.scheduler().addBuild(jobset, t.job, t.drvPath);
    byDrv[t.drvPath] = id;
    builds_.push_back(id);
  }
}

scheduler::BuildCounts BuildProgress::counts() {
  if (builds_.empty()) return {};
  auto [lo, hi] = std::minmax_element(builds_.begin(), builds_.end());
  return farm_.scheduler().db().buildCountsInRange(farm_.jobset(), *lo, *hi);
}

bool BuildProgress::finished(bool& anyFailed) {
  scheduler::BuildCounts c = counts();
  anyFailed = c.finished > c.succeeded;
  return c.finished == c.all;
}

void BuildProgress::show(bool force) {
  scheduler::BuildCounts c = counts();
  int64_t done = c.finished, failed = c.finished - c.succeeded;
  std::vector<std::string> running;
  size_t queued = 0;
  for (auto& q : farm_.scheduler().queue()) {
    if (q.state == "running")
      running.push_back(stepName(q.drvPath));
    else
      ++queued;
  }
  auto secs =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.now() - start_);
  std::ostringstream line;
  line << "[" << done - failed << "/" << c.all << " built, " << running.size()
       << " running, " << queued << " queued, " << failed << " failed, "
       << secs.count() << " s]";
  for (size_t i = 0; i < running.size() && i < 3; ++i)
    line << " " << running[i];
  if (running.size() > 3) line << " ...";
  std::string text = line.str();
  if (tty_) {
    std::cerr << "\r\033[K" << text << (force ? "\n" : "") << std::flush;
  } else if (force || text.substr(0, text.find(',')) !=
                          lastLine_.substr(0, lastLine_.find(','))) {
    std::cerr << text << "\n";
  }
  lastLine_ = text;
}

void BuildProgress::cancelUnfinished() {
  for (int64_t id : builds_) {
    auto b = farm_.scheduler().db().build(id);
    if (b && !b->finished)
      farm_.scheduler().applyRequest("build-cancel", {{"build", id}});
  }
}

BuildOutcome BuildProgress::run(const std::atomic<bool>& stop) {
  start_ = clock_.now();
  startMs_ = clock_.nowMs();
  submit();
  std::string stoppedBecause;
  auto lastShown = start_;
  for (bool anyFailed = false;;) {
    farm_.scheduler().pollOnce(kPoll);
    // The counts are read only after a build changed: pollOnce returns
    // at every message, and two queries per message took a fifth of this
    // thread's time, which dispatches the steps.
    if (farm_.takeBuildChanges()) {
      if (finished(anyFailed)) break;
      if (anyFailed && !keepGoing_) break;
    }
    if (stop.load()) stoppedBecause = "interrupted";
    if (auto why = farm_.workerFailure(); !why.empty())
      stoppedBecause = "the local worker stopped: " + why;
    if (!stoppedBecause.empty()) break;
    if (clock_.now() - lastShown >= std::chrono::milliseconds(500)) {
      show(false);
      lastShown = clock_.now();
    }
  }
  show(true);
  cancelUnfinished();
  return collect(stoppedBecause);
}

BuildOutcome BuildProgress::collect(std::string stoppedBecause) {
  BuildOutcome out;
  out.stoppedBecause = std::move(stoppedBecause);
  auto& db = farm_.scheduler().db();
  std::map<std::string, int64_t> byDrv;
  for (int64_t id : builds_) byDrv[db.build(id)->drvPath] = id;
  for (auto& t : targets_) {
    auto b = db.build(byDrv[t.drvPath]);
    for (auto& [name, path] : db.buildOutputs(b->id))
      if (name == t.output) t.outputPath = path;
    if (b->status != 0 || t.outputPath.empty())
      out.failedJobs.push_back(t.job + " (" + t.output + ")");
  }
  // The steps that failed in this run (not those merely cancelled or
  // skipped because of them).
  for (auto& s : db.allSteps()) {
    auto st = static_cast<StepStatus>(s.status);
    if (s.finished && s.stopMs >= startMs_ && st != StepStatus::kSuccess &&
        st != StepStatus::kDepFailed && st != StepStatus::kCancelled)
      out.failedSteps.push_back({s.drvPath, s.error, s.attempts});
  }
  out.targets = targets_;
  return out;
}

}  // namespace kiln::cli
