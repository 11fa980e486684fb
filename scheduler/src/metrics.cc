// ServiceMetrics: the scheduler's Prometheus families.
#include "kiln/scheduler/metrics.h"

#include <algorithm>

namespace kiln::scheduler {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

Histogram::BucketBoundaries latencyBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,  0.5,    1,     2.5,  5,     10};
}

// Systems Nix knows by name: labelled as themselves even before a worker
// for them joins (steps for them wait, and operators want to see that).
const std::set<std::string>& wellKnownSystems() {
  static const std::set<std::string> known = {
      "x86_64-linux",  "i686-linux",     "aarch64-linux", "armv6l-linux",
      "armv7l-linux",  "riscv64-linux",  "powerpc64le-linux",
      "s390x-linux",   "mips64el-linux", "x86_64-darwin", "aarch64-darwin",
      "x86_64-freebsd", "i686-freebsd",  "builtin"};
  return known;
}

Histogram::BucketBoundaries durationBuckets() {
  return {0.1, 1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 14400, 36000};
}

}  // namespace

ServiceMetrics::ServiceMetrics(prometheus::Registry& r)
    : queued_(BuildGauge()
                  .Name("kiln_queue_steps")
                  .Help("Runnable steps waiting for a worker, per system")
                  .Register(r)),
      running_(BuildGauge()
                   .Name("kiln_running_steps")
                   .Help("Steps running on workers")
                   .Register(r)
                   .Add({})),
      workers_(BuildGauge()
                   .Name("kiln_workers")
                   .Help("Connected workers")
                   .Register(r)
                   .Add({})),
      freeSlots_(BuildGauge()
                     .Name("kiln_free_slots")
                     .Help("Free build slots over all workers")
                     .Register(r)
                     .Add({})),
      idleSeconds_(BuildCounter()
                       .Name("kiln_idle_worker_seconds_total")
                       .Help("Worker-slot seconds idle while a step that "
                             "slot could run was queued")
                       .Register(r)
                       .Add({})),
      longestIdle_(BuildGauge()
                       .Name("kiln_longest_idle_with_work_seconds")
                       .Help("Longest time a slot stayed idle while work it "
                             "could run waited")
                       .Register(r)
                       .Add({})),
      retries_(BuildCounter()
                   .Name("kiln_step_retries_total")
                   .Help("Transient step failures retried")
                   .Register(r)
                   .Add({})),
      dispatches_(BuildCounter()
                      .Name("kiln_dispatch_decisions_total")
                      .Help("Steps assigned to workers")
                      .Register(r)
                      .Add({})),
      dispatchLatency_(
          BuildHistogram()
              .Name("kiln_dispatch_latency_seconds")
              .Help("From the event that made an assignment possible (result, "
                    "ingestion, worker joined) to its BuildStep sent")
              .Register(r)
              .Add({}, latencyBuckets())),
      slotIdle_(BuildHistogram()
                    .Name("kiln_slot_idle_with_work_seconds")
                    .Help("Per worker slot: from the moment it was free while "
                          "a step it could run was queued until that ended "
                          "(a dispatch, the step went elsewhere, the worker "
                          "left)")
                    .Register(r)
                    .Add({}, latencyBuckets())),
      slotIdleMax_(BuildGauge()
                       .Name("kiln_slot_idle_with_work_max_seconds")
                       .Help("Longest such stretch of one slot so far")
                       .Register(r)
                       .Add({})),
      loopTurn_(BuildHistogram()
                    .Name("kiln_scheduler_loop_turn_seconds")
                    .Help("One turn of the scheduler's service loop (a message "
                          "with its events and dispatch, periodic work, a "
                          "slice of an ingestion): how long a message that "
                          "just arrived may wait unread")
                    .Register(r)
                    .Add({}, latencyBuckets())),
      loopTurnMax_(BuildGauge()
                       .Name("kiln_scheduler_loop_turn_max_seconds")
                       .Help("Longest such turn so far")
                       .Register(r)
                       .Add({})),
      stepDuration_(BuildHistogram()
                        .Name("kiln_step_duration_seconds")
                        .Help("Duration of finished step attempts")
                        .Register(r)),
      stepPeakMemory_(BuildHistogram()
                          .Name("kiln_step_peak_memory_bytes")
                          .Help("Peak memory of finished step attempts "
                                "(their control group's)")
                          .Register(r)),
      stepCpu_(BuildHistogram()
                   .Name("kiln_step_cpu_seconds")
                   .Help("CPU time of finished step attempts, every "
                         "process of the build")
                   .Register(r)),
      stepBuildDir_(BuildHistogram()
                        .Name("kiln_step_build_dir_bytes")
                        .Help("Largest build directory of finished step "
                              "attempts")
                        .Register(r)),
      bytesSent_(BuildCounter()
                     .Name("kiln_transfer_bytes_sent_total")
                     .Help("NAR bytes sent to workers (inputs)")
                     .Register(r)
                     .Add({})),
      bytesReceived_(BuildCounter()
                         .Name("kiln_transfer_bytes_received_total")
                         .Help("NAR bytes uploaded by workers")
                         .Register(r)
                         .Add({})),
      referenceMismatches_(
          BuildCounter()
              .Name("kiln_upload_reference_mismatches_total")
              .Help("Uploads whose worker-reported references differ from "
                    "the scanned ones (the scanned ones are registered)")
              .Register(r)
              .Add({})),
      adoptedSteps_(BuildCounter()
                        .Name("kiln_steps_adopted_total")
                        .Help("Steps a worker still ran when it said Hello "
                              "again (e.g. after a scheduler restart), "
                              "taken over instead of started again")
                        .Register(r)
                        .Add({})),
      refusedClaims_(BuildCounter()
                         .Name("kiln_step_claims_refused_total")
                         .Help("Steps a worker's Hello claimed to hold that "
                               "the scheduler's records do not give to it "
                               "(refused; the worker drops them)")
                         .Register(r)
                         .Add({})) {}

const std::string& ServiceMetrics::systemLabel(const std::string& system) {
  static const std::string other = "other";
  if (ownLabels_.count(system)) return system;
  if (ownLabels_.size() >= kMaxSystemLabels ||
      (!wellKnownSystems().count(system) && !workerSystems_.count(system)))
    return other;
  ownLabels_.insert(system);
  return system;
}

void ServiceMetrics::update(const SchedulerMetrics& m) {
  workerSystems_ = m.workerSystems;
  std::map<std::string, size_t> byLabel;
  for (auto& [sys, n] : m.queuedBySystem)
    if (n) byLabel[systemLabel(sys)] += n;
  for (auto it = queuedBySystem_.begin(); it != queuedBySystem_.end();) {
    if (byLabel.count(it->first)) {
      ++it;
      continue;
    }
    queued_.Remove(it->second);
    it = queuedBySystem_.erase(it);
  }
  for (auto& [label, n] : byLabel) {
    auto it = queuedBySystem_.find(label);
    if (it == queuedBySystem_.end())
      it = queuedBySystem_.emplace(label, &queued_.Add({{"system", label}}))
               .first;
    it->second->Set(double(n));
  }
  running_.Set(double(m.runningSteps));
  workers_.Set(double(m.workers));
  freeSlots_.Set(double(m.freeSlots));
  if (m.idleSlotSeconds > last_.idleSlotSeconds)
    idleSeconds_.Increment(m.idleSlotSeconds - last_.idleSlotSeconds);
  longestIdle_.Set(
      std::chrono::duration<double>(m.longestIdleWithWork).count());
  if (m.retries > last_.retries)
    retries_.Increment(double(m.retries - last_.retries));
  if (m.dispatchDecisions > last_.dispatchDecisions)
    dispatches_.Increment(
        double(m.dispatchDecisions - last_.dispatchDecisions));
  last_ = m;
}

void ServiceMetrics::observeDispatchLatency(double seconds) {
  dispatchLatency_.Observe(seconds);
  ++dispatchCount_;
  dispatchLatencySum_ += seconds;
}

void ServiceMetrics::observeIdleStretches(
    const std::vector<Duration>& stretches) {
  for (Duration d : stretches) {
    double s = std::chrono::duration<double>(d).count();
    slotIdle_.Observe(s);
    longestSlotIdle_ = std::max(longestSlotIdle_, s);
  }
  slotIdleMax_.Set(longestSlotIdle_);
}

void ServiceMetrics::observeLoopTurn(double seconds) {
  loopTurn_.Observe(seconds);
  if (seconds > longestLoopTurn_) {
    longestLoopTurn_ = seconds;
    loopTurnMax_.Set(seconds);
  }
}

void ServiceMetrics::observeStepDuration(const std::string& system,
                                         double seconds) {
  stepDuration_.Add({{"system", systemLabel(system)}}, durationBuckets())
      .Observe(seconds);
}

void ServiceMetrics::observeStepUsage(const std::string& system,
                                      uint64_t peakMemoryBytes,
                                      uint64_t cpuTimeUs,
                                      uint64_t buildDirBytes) {
  // 1 MiB to 64 GiB, by powers of 4.
  static const prometheus::Histogram::BucketBoundaries bytes = {
      1 << 20, 4 << 20,         16 << 20,         64 << 20,        256 << 20,
      1 << 30, 4.0 * (1 << 30), 16.0 * (1 << 30), 64.0 * (1 << 30)};
  const auto& label = systemLabel(system);
  if (peakMemoryBytes)
    stepPeakMemory_.Add({{"system", label}}, bytes)
        .Observe(double(peakMemoryBytes));
  if (cpuTimeUs)
    stepCpu_.Add({{"system", label}}, durationBuckets())
        .Observe(double(cpuTimeUs) / 1e6);
  if (buildDirBytes)
    stepBuildDir_.Add({{"system", label}}, bytes)
        .Observe(double(buildDirBytes));
}

}  // namespace kiln::scheduler
