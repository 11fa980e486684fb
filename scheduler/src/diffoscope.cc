// The reproducibility checks' reports: diffoscope as a bounded child
// process, and the queue that keeps it off the event loop (diffoscope.h).
#include "kiln/scheduler/diffoscope.h"

#include <sys/wait.h>

#include "kiln/common/logging.h"

namespace kiln::scheduler {

const char* diffOutcomeName(DiffReport::Outcome o) {
  switch (o) {
    case DiffReport::Outcome::kDiffers:
      return "differs";
    case DiffReport::Outcome::kSame:
      return "same";
    case DiffReport::Outcome::kTimedOut:
      return "timed-out";
    case DiffReport::Outcome::kUnavailable:
      return "unavailable";
    case DiffReport::Outcome::kFailed:
      return "failed";
  }
  return "failed";
}

DiffoscopeDiffer::DiffoscopeDiffer(ProcessLauncher& launcher,
                                   DiffoscopeLimits limits, std::string program)
    : launcher_(launcher), limits_(limits), program_(std::move(program)) {}

DiffReport DiffoscopeDiffer::diff(const std::string& first,
                                  const std::string& second) {
  using Clock = std::chrono::steady_clock;
  DiffReport r;
  ProcessSpec spec;
  spec.program = program_;
  spec.args = {program_, "--no-progress", "--text", "-", first, second};
  spec.env = currentEnvironment();
  spec.searchPath = true;
  std::unique_ptr<ChildProcess> child;
  try {
    child = launcher_.start(spec);
  } catch (const std::exception& e) {
    r.outcome = DiffReport::Outcome::kUnavailable;
    r.text = e.what();
    return r;
  }
  auto deadline = Clock::now() + limits_.timeLimit;
  bool killed = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0 && !killed) {
      child->killTree();
      killed = true;
    }
    auto ev =
        child->next(killed ? std::chrono::milliseconds(1000)
                           : std::max(left, std::chrono::milliseconds(1)));
    if (ev.kind == ProcessEvent::Kind::kOutput) {
      size_t room =
          limits_.maxBytes - std::min(limits_.maxBytes, r.text.size());
      if (ev.data.size() > room) r.truncated = true;
      r.text.append(ev.data, 0, std::min(room, ev.data.size()));
    } else if (ev.kind == ProcessEvent::Kind::kExited) {
      int st = ev.status;
      int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      r.outcome = killed        ? DiffReport::Outcome::kTimedOut
                  : code == 0   ? DiffReport::Outcome::kSame
                  : code == 1   ? DiffReport::Outcome::kDiffers
                  : code == 127 ? DiffReport::Outcome::kUnavailable
                                : DiffReport::Outcome::kFailed;
      return r;
    }
  }
}

DiffQueue::DiffQueue(Differ& differ, size_t maxQueued)
    : differ_(differ), maxQueued_(maxQueued), thread_([this] { run(); }) {}

DiffQueue::~DiffQueue() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    jobs_.clear();
  }
  cv_.notify_all();
  thread_.join();
}

bool DiffQueue::submit(std::string first, std::string second, Done done) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || jobs_.size() >= maxQueued_) return false;
    jobs_.push_back({std::move(first), std::move(second), std::move(done)});
  }
  cv_.notify_one();
  return true;
}

void DiffQueue::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    try {
      job.done(differ_.diff(job.first, job.second));
    } catch (const std::exception& e) {
      logWarn("reproducibility report: " + std::string(e.what()));
    } catch (...) {
    }
  }
}

}  // namespace kiln::scheduler
