// Records the expected finish of new evaluations off the loop
// (estimate_recorder.h).
#include "estimate_recorder.h"

#include "kiln/common/logging.h"
#include "kiln/scheduler/eval_estimate.h"

namespace kiln::scheduler {

EstimateRecorder::EstimateRecorder(DatabaseSpec database)
    : spec_(std::move(database)), thread_([this] { run(); }) {}

EstimateRecorder::~EstimateRecorder() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    jobs_.clear();
  }
  cv_.notify_all();
  thread_.join();
}

void EstimateRecorder::submit(int64_t eval, unsigned slots, int64_t nowMs) {
  {
    std::lock_guard lock(mu_);
    jobs_.push_back({eval, slots, nowMs});
  }
  cv_.notify_all();
}

void EstimateRecorder::drain() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return jobs_.empty() && !busy_; });
}

void EstimateRecorder::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    Job job = jobs_.front();
    jobs_.pop_front();
    busy_ = true;
    lock.unlock();
    estimate(job);
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void EstimateRecorder::estimate(const Job& job) {
  // The thread's work: nothing may escape it.
  try {
    if (!db_) db_ = std::make_unique<StateDb>(spec_, StateDb::Existing{});
    auto e = estimateEvaluation(*db_, job.eval, job.slots, job.nowMs,
                                evalStepHistory(*db_, job.eval));
    if (e) recordEvalEstimate(*db_, job.eval, *e);
  } catch (const std::exception& ex) {
    logWarn("estimating evaluation " + std::to_string(job.eval) + ": " +
            ex.what());
    db_.reset();  // a connection that failed is opened anew next time
  }
}

}  // namespace kiln::scheduler
