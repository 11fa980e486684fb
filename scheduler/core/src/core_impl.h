#pragma once
// Private state of SchedulerCore. The core owns every step in one vector
// (slots reused through a free list, generation-checked ids); edges are slot
// indices. Builds are kept by id. See docs/scheduler.md.

#include <array>
#include <climits>
#include <deque>
#include <map>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "jobset_usage.h"
#include "kiln/scheduler/core.h"
#include "ready_queue.h"

namespace kiln::scheduler {

constexpr uint32_t kNone = UINT32_MAX;

// Scheduling attributes inherited from the builds that need a step: the
// fold (max, max, min-with-its-jobset, max) over its parents. A step's own
// attributes add its expected duration to `cpAbove` (the critical path).
struct Attrs {
  int global = INT_MIN;
  int local = INT_MIN;
  BuildId minBuild = INT64_MAX;
  JobsetId jobset = 0;
  double cpAbove = 0;
  bool attached() const { return minBuild != INT64_MAX; }
  friend bool operator==(const Attrs&, const Attrs&) = default;
};

Attrs combine(const Attrs& a, const Attrs& b);
// True if every field of `to` is at least as good as in `from`.
bool improves(const Attrs& from, const Attrs& to);

enum class StepState : uint8_t {
  kWaiting,
  kQueued,
  kRunning,
  kBackoff,
  kFailed
};

struct Step {
  uint32_t generation = 0;
  bool alive = false;
  std::string drvPath;
  std::string pname;
  uint32_t cls = 0;
  uint32_t level = 0;  // 1 + max level of deps: parents sort above children
  double expected = 1;
  int64_t createdMs = 0;
  std::vector<uint32_t> deps;   // unfinished dependencies
  std::vector<uint32_t> rdeps;  // steps depending on this one
  std::vector<BuildId> topOf;   // builds whose top step this is
  Attrs parents;                // fold over topOf and rdeps
  Attrs applied;                // own attributes last acted upon
  StepState state = StepState::kWaiting;
  uint32_t blockedDeps = 0;  // deps that failed or are blocked themselves
  bool failed = false;       // failed for good (until a retried success)
  StepStatus failStatus = StepStatus::kFailed;
  unsigned attempts = 0;
  TimePoint backoffUntil{};
  TimePoint startedAt{};
  // Free memory the worker it last ran on had when it was sent there
  // (its effective free memory), and the need that an out-of-memory end
  // there gives its retry: more than that (docs/scheduler.md, "Memory").
  std::optional<uint64_t> sentWithFree;
  uint64_t oomNeed = 0;
  uint32_t worker = kNone;  // while running, until its slot is released
  StepKey key;              // while queued
  JobsetId keyJobset = 0;
  JobsetId chargedJobset = 0;  // while running
  double chargedSeconds = 0;
  bool inHeap = false;
  bool recompute = false;
  // A reproducibility check's second build (repeats.cc): in no build, in
  // no queue, never on a worker named in `avoidWorkers` (the first
  // build's first, then those that refused it).
  bool repeat = false;
  std::vector<std::string> avoidWorkers;
};

struct Build {
  BuildId id = 0;
  JobsetId jobset = 0;
  uint32_t top = kNone;
  int global = 0;
  int local = 0;
  bool failed = false;
};

// A ready-queue class: one system type with one set of required features.
struct StepClass {
  std::string system;
  std::vector<std::string> features;  // sorted, unique
  std::vector<uint32_t> workers;      // eligible workers
  size_t freeSlots = 0;               // free slots over `workers`
};

struct Worker {
  uint32_t generation = 0;
  bool alive = false;
  WorkerSpec spec;
  std::vector<uint32_t> running;
  double reportedLoad = 0;
  size_t runningAtHeartbeat = 0;
  WorkerHealth health;
  // Why it takes no new step (a breached threshold), empty if it does.
  std::string pressure;
  // Memory needs of the steps sent since its last heartbeat, which its
  // reported free memory does not show yet.
  uint64_t memorySent = 0;
  TimePoint lastHeartbeat{};
  std::optional<TimePoint> idleSince;
  // One entry per free slot that could run a queued step: since when,
  // oldest first (the next dispatch here ends the oldest stretch).
  std::deque<TimePoint> idleSlotsSince;
  std::vector<uint32_t> classes;  // classes this worker can serve
  size_t free() const { return spec.slots - running.size(); }
  // Free slots that take new steps: none while under pressure.
  size_t available() const { return pressure.empty() ? free() : 0; }
};

// Checks that `id` names a live slot of `slots` (steps or workers); throws
// SchedulerError naming `what` otherwise.
template <class Slots, class Id>
uint32_t checkSlot(const Slots& slots, Id id, const char* what) {
  if (id.index >= slots.size() || !slots[id.index].alive ||
      slots[id.index].generation != id.generation)
    throw SchedulerError(std::string("scheduler: unknown or stale ") + what +
                         " id " + std::to_string(id.index) + "/" +
                         std::to_string(id.generation));
  return id.index;
}

struct HeapEntry {
  uint32_t level;
  uint32_t step;
  uint32_t generation;
  friend auto operator<=>(const HeapEntry&, const HeapEntry&) = default;
};

struct BackoffEntry {
  TimePoint until;
  uint32_t step;
  uint32_t generation;
  friend auto operator<=>(const BackoffEntry&, const BackoffEntry&) = default;
};

struct SchedulerCore::Impl {
  Impl(const Clock& c, SchedulerConfig cfg, const InputLocality* loc)
      : clock(c),
        config(cfg),
        locality(loc),
        usage(cfg.fairnessWindow),
        lastAccrual(c.wallNow()) {}

  const Clock& clock;
  SchedulerConfig config;
  const InputLocality* locality;

  std::vector<Step> steps;
  std::vector<uint32_t> freeSteps;
  std::unordered_map<std::string, uint32_t> byDrv;
  std::unordered_map<BuildId, Build> builds;
  std::vector<StepClass> classes;
  std::map<std::pair<std::string, std::vector<std::string>>, uint32_t>
      classIndex;
  std::vector<Worker> workers;
  std::vector<uint32_t> freeWorkers;
  ReadyQueues queues;
  JobsetUsage usage;
  std::unordered_map<std::string, double> history;
  std::unordered_map<std::string, uint64_t> peaks;  // last peak memory
  std::priority_queue<HeapEntry> propagation;
  std::priority_queue<BackoffEntry, std::vector<BackoffEntry>, std::greater<>>
      backoff;
  std::vector<BuildEvent> events;
  std::vector<StepAbort> aborts;
  std::vector<uint32_t> repeats;        // waiting repeats, oldest first
  std::vector<StepId> dropped;          // by cancellation, not yet taken
  std::vector<Duration> idleStretches;  // ended, not yet taken
  SchedulerMetrics counters;
  std::array<size_t, 5> stateCount{};
  TimePoint lastAccrual;

  // graph.cc
  uint32_t resolve(StepId id) const { return checkSlot(steps, id, "step"); }
  // The live build `id`; throws SchedulerError naming `action` otherwise.
  std::unordered_map<BuildId, Build>::iterator findBuild(BuildId id,
                                                         const char* action);
  StepId idOf(uint32_t idx) const { return {idx, steps[idx].generation}; }
  bool poisoned(const Step& s) const { return s.failed || s.blockedDeps > 0; }
  uint32_t classFor(const std::string& system,
                    std::vector<std::string> features);
  uint32_t allocStep();
  void freeStep(uint32_t idx);
  void setState(Step& s, StepState st);
  Attrs buildAttrs(const Build& b) const;
  Attrs outAttrs(const Step& s) const;
  void schedule(uint32_t idx, bool recompute);
  void propagate();
  void releaseParent(uint32_t idx);
  void detach(uint32_t idx);
  void syncFairness(JobsetId jobset);

  // dispatch.cc
  void advance();
  void maybeEnqueue(uint32_t idx);
  void enqueue(uint32_t idx);
  void dequeue(uint32_t idx);
  void requeue(uint32_t idx);
  std::optional<uint32_t> bestClass() const;
  // The best worker of the class with a free slot for the step, none if
  // its memory need keeps it off all of them for now.
  std::optional<uint32_t> chooseWorker(uint32_t cls, uint32_t step) const;
  double effectiveLoad(const Worker& w) const;
  void start(uint32_t idx, uint32_t worker);
  // Gives the worker slot of running step `idx` back (it stays running).
  void freeSlot(uint32_t idx);
  // Ends a running step's attempt: its slot, if it still holds one, and its
  // running charge; the step is then waiting.
  void releaseRunning(uint32_t idx);

  // failure.cc
  void succeed(uint32_t idx, Duration took);
  void failPermanently(uint32_t idx, StepStatus status);
  void retryOrFail(uint32_t idx, const StepResult& result);
  void failBuild(BuildId id, StepStatus status, const std::string& cause);
  void poisonRdeps(uint32_t idx, const std::string& cause);
  void unpoisonRdeps(uint32_t idx, const std::string& cause);
  void endAttempt(uint32_t idx, const StepResult& result);

  // workers.cc
  uint32_t resolveWorker(WorkerId id) const {
    return checkSlot(workers, id, "worker");
  }
  bool eligible(const WorkerSpec& w, const StepClass& c) const;
  void linkWorker(uint32_t w, uint32_t cls);
  void dropWorker(uint32_t w);

  // pressure.cc
  // Marks the worker under pressure (`why` non-empty) or not; its free
  // slots leave or rejoin its classes' counts.
  void setPressure(uint32_t w, std::string why);
  uint64_t memoryNeed(const Step& s) const;
  std::optional<uint64_t> freeMemory(const Worker& w) const;
  // Whether the step's memory need restricts its placement: some suitable
  // worker reports that much free memory (busy or not).
  bool memoryGated(const Step& s, uint64_t need) const;
  bool fitsMemory(const Worker& w, uint64_t need) const;
  WaitReason memoryPlacement(const Step& s, uint64_t need) const;
  WaitReason pressurePlacement(const StepClass& c) const;
  // Records the attempt's peak and, after running out of memory, the need
  // of the retry.
  void notePeak(Step& s, const StepResult& result);

  // repeats.cc
  // Gives free slots left after the graph's work to waiting repeats.
  void dispatchRepeats(std::vector<Assignment>& out, size_t max);
  // The least loaded worker other than the repeat's first one with a free
  // slot for it, none if there is no such worker now.
  std::optional<uint32_t> repeatWorker(const Step& s) const;
  bool repeatMayUse(const Step& s, uint32_t w) const;
  // A running repeat whose worker went away waits again.
  void requeueRepeat(uint32_t idx);
  WaitReason repeatPlacement(const Step& s) const;

  // introspect.cc
  void accrueIdle(TimePoint now);
  void settleIdleSlots(Worker& w, size_t idleSlots);
  WaitReason placement(const Step& s) const;
};

}  // namespace kiln::scheduler
