#pragma once
// Reproducibility checks' second builds (docs/release.md, "Reproducibility
// checks"): the service's side of the core's repeats. Pending checks of
// the database become repeats of the core; a dispatched repeat's outputs
// are kept as NAR files in the check's side location (never registered),
// compared by NAR hash with the registered outputs when it ends, and the
// verdict recorded; a difference gets a diffoscope report made on the
// DiffQueue's thread and stored from the service thread. Service thread
// only, except the queue's thread.

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "deferred_writes.h"
#include "kiln/common/background_remover.h"
#include "kiln/common/clock.h"
#include "kiln/common/file.h"
#include "kiln/scheduler/core.h"
#include "kiln/scheduler/diffoscope.h"
#include "kiln/scheduler/service.h"
#include "kiln/scheduler/state_db.h"
#include "kiln/store/local_store.h"

namespace kiln::scheduler {

/// The protocol's step ids of check builds start here (a check of step
/// row `s` is `kRepeatIdBase + s`): they never meet a step row's id.
inline constexpr int64_t kRepeatIdBase = int64_t(1) << 48;

/// Where check `step`'s second build keeps its NARs and log:
/// `<stateDir>/repeat-checks/<step>`.
std::string repeatSideLocation(const std::string& stateDir, int64_t step);

/// How a check's second build ended, for RepeatRuns::finished.
struct RepeatOutcome {
  bool built = false;  ///< the worker built it and every output arrived
  std::string error;   ///< why not, when !built
  /// Output name → NAR hash ("sha256:…") of the second build.
  std::map<std::string, std::string> narHashes;
  /// Output name → its path (the registered first build's).
  std::map<std::string, store::StorePath> outputs;
};

/// The checks whose second build the core schedules. Borrows everything
/// it is given; all must outlive it.
class RepeatRuns {
 public:
  /// `differ` makes the reports (null: Debian's diffoscope).
  RepeatRuns(const ServiceConfig& config, StateDb& db, DeferredWrites& deferred,
             store::LocalStore& store, SchedulerCore& core, const Clock& clock,
             std::shared_ptr<Differ> differ);
  ~RepeatRuns();
  RepeatRuns(const RepeatRuns&) = delete;
  RepeatRuns& operator=(const RepeatRuns&) = delete;

  /// At start: checks left running by an earlier scheduler wait again
  /// (their worker may still claim them: adoptable), and every pending
  /// check (at most kMaxListedRepeats) becomes a repeat.
  void restore();
  /// The waiting repeat of check `step` if the earlier scheduler had sent
  /// it to `worker` and it went nowhere since: that worker's Hello may
  /// claim it (RunningSteps::adopt), then started() follows.
  std::optional<StepId> adoptable(int64_t step, const std::string& worker);
  /// Step row `step` just got a pending check (its first build ran on
  /// `firstWorker`; `refusedBy` refused its second build before): a repeat
  /// of the core from now on, avoiding them all. A row that cannot be
  /// read is left to the next restore().
  void add(int64_t step, const std::string& firstWorker,
           const std::vector<std::string>& refusedBy = {});
  /// The check (its step row id) of the core's repeat `sid`, if known.
  std::optional<int64_t> checkOf(StepId sid) const;
  /// Every repeat of the core with its check's step row, oldest first.
  std::vector<std::pair<StepId, int64_t>> known() const;
  /// The repeat `sid` of check `step` went to `worker`.
  void started(StepId sid, int64_t step, const std::string& worker);
  /// The repeat `sid` could not be sent: it waits again.
  void notSent(StepId sid);
  /// The worker `worker` of repeat `sid` (check `step`) refused it: it
  /// holds an output already (protocol::kCheckRefusedPrefix). The check
  /// waits again, avoiding that worker too (recorded: a restart keeps
  /// avoiding it). When no connected worker may take it, it waits at most
  /// ServiceConfig::refusedCheckWait for one (a Hello not read yet, a
  /// worker restarting: expireRefused), then ends `failed` with `error`.
  /// `holdsSlot` false: the repeat's slot was given back (its worker came
  /// back on another connection with the result): it waits again thus.
  void refused(StepId sid, int64_t step, const std::string& worker,
               const std::string& error, bool holdsSlot = true);
  /// Checks refused with no other worker to go to whose wait (refused)
  /// ended by `now` without one taking them end `failed`.
  void expireRefused(Clock::TimePoint now);
  /// Keeps output `output` of check `step`'s second build, its NAR in
  /// `nar` (offset 0), as `<side location>/<output>.nar`. Throws SysError.
  void keep(int64_t step, const std::string& output, int nar);
  /// The repeat `sid` of check `step` ended: the verdict is recorded and,
  /// for a difference, the report is queued.
  void finished(StepId sid, int64_t step, const RepeatOutcome& outcome);
  /// Readable while reports wait (poll it with the transport).
  int wakeFd() const { return wake_.get(); }
  /// Stores the reports made since the last call.
  void takeReports();
  /// Every ServiceConfig::repeatPruneInterval (the first call prunes):
  /// removes the side locations that repeatNarsToPrune names (at most
  /// 100 a turn) on the remover's thread and forgets them.
  void pruneWhenDue(Clock::TimePoint now);
  /// Blocks until the removals queued so far are done (tests).
  void drainRemovals() { remover_.drain(); }

 private:
  struct Report {
    int64_t step;
    std::string output;
    DiffReport report;
  };
  /// Differing outputs of a check still being compared, and the text so far.
  struct Pending {
    size_t left = 0;
    std::string text;
  };
  void queueReports(int64_t step, const std::vector<std::string>& differing,
                    const std::map<std::string, store::StorePath>& outputs);
  /// Records that check `step` ended `failed`: no worker could build it.
  void failRefused(int64_t step, const std::string& error);
  /// The core's repeat of check `step`, if known.
  std::optional<StepId> sidOf(int64_t step) const;

  const ServiceConfig& config_;
  StateDb& db_;
  DeferredWrites& deferred_;
  store::LocalStore& store_;
  SchedulerCore& core_;
  const Clock& clock_;
  /// A repeat of the core: its check's step row and what it was made of.
  struct Known {
    int64_t step = 0;
    RepeatSpec spec;
  };
  std::map<std::pair<uint32_t, uint32_t>, Known> bySid_;
  std::map<int64_t, Pending> pending_;
  /// Checks running at the last start, by step row: their worker then.
  std::map<int64_t, std::string> wasRunningOn_;
  /// Checks refused with no other worker known, by step row: until when
  /// they wait for one, and the refusal.
  struct RefusedWait {
    Clock::TimePoint until;
    std::string error;
  };
  std::map<int64_t, RefusedWait> refusedUntil_;
  AutoCloseFD wake_;
  std::mutex mu_;
  std::vector<Report> done_;  // guarded by mu_
  std::optional<Clock::TimePoint> lastPrune_;
  BackgroundRemover remover_;
  std::unique_ptr<ProcessLauncher> launcher_;
  std::shared_ptr<Differ> differ_;
  std::unique_ptr<Differ> unpacking_;
  std::unique_ptr<DiffQueue> queue_;  // last: its thread stops first
};

}  // namespace kiln::scheduler
