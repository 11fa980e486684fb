#pragma once
/// Ingestion (docs/scheduler.md): turns a build's `.drv` (already valid in
/// the central store) into steps of the policy core and rows of the state
/// database. The closure is expanded through the `.drv` files; derivations
/// whose outputs are all valid in the central store become no step; a
/// derivation with an unexpired cached failure becomes a step failed at once
/// with status 8 (its dependents then fail with status 2 through the core).

#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>

#include "kiln/scheduler/core.h"
#include "kiln/scheduler/drv_prefetch.h"
#include "kiln/scheduler/state_db.h"
#include "kiln/store/derivation.h"
#include "kiln/store/local_store.h"

namespace kiln::scheduler {

/// The two ids of a step: the core's slot id and the database row id (which
/// is also the protocol's stepId). One owner: the Ingestor, which makes
/// both and pairs them; the running steps tell it when a step left the
/// core (Ingestor::forget).
class StepIndex {
 public:
  /// Pairs `core` with row `db`, whose `attempts` were counted so far.
  void add(StepId core, int64_t db, int64_t attempts = 0);
  /// Forgets a step that left the core.
  void erase(StepId core);
  std::optional<int64_t> dbId(StepId core) const;
  std::optional<StepId> coreId(int64_t db) const;
  /// The attempts row `db` counts (its column `attempts`, kept here so a
  /// dispatch need not read the row), 0 if unknown.
  int64_t attempts(int64_t db) const;
  /// Counts an attempt of row `db` (as StateDb::startStep does).
  void countAttempt(int64_t db);
  size_t size() const { return toDb_.size(); }
  /// Every step, by database id (ascending).
  const std::map<int64_t, StepId>& byDbId() const { return toCore_; }

 private:
  std::map<StepId, int64_t> toDb_;
  std::map<int64_t, StepId> toCore_;
  std::map<int64_t, int64_t> attempts_;  ///< by database id
};

/// What ingesting one build's derivation gave.
struct IngestResult {
  /// The core step of the build's own derivation, when something is left to
  /// build (possibly already failed: the core then emits kFailed).
  std::optional<StepId> top;
  /// New steps created in the core by this call.
  size_t newSteps = 0;
  /// Derivations of the closure whose outputs were already valid.
  size_t validDerivations = 0;
};

/// How ingesting one build of a batch (Ingestor::ingestAll) ended: its
/// result, or the error that aborts the build.
struct IngestOutcome {
  IngestResult result;
  std::exception_ptr error;  ///< null when it was ingested
};

/// Expands `.drv` closures into the core. Holds references to everything it
/// is given; all must outlive it. Not thread-safe (the service's thread).
class Ingestor {
 public:
  Ingestor(StateDb& db, store::LocalStore& store, SchedulerCore& core,
           const Clock& clock);

  /// The database id of each core step it made, and back.
  const StepIndex& index() const { return index_; }
  /// Counts an attempt of step row `db` in the index (it was dispatched).
  void countAttempt(int64_t db) { index_.countAttempt(db); }
  /// Forgets the ids of a step that left the core (built, aborted, or
  /// cancelled): a later ingestion of its .drv pairs a new core step with
  /// the same row.
  void forget(StepId step) { index_.erase(step); }

  /// Ingests the closure of `drvPath` (a full logical path). Throws
  /// store::InvalidPathError if a `.drv` of the closure is not valid in the
  /// central store, FormatError if one is malformed or claims outputs its
  /// contents do not imply (before its outputs are looked up: a forged
  /// `.drv` naming a built output is refused too). The database changes
  /// are one transaction.
  IngestResult ingest(const std::string& drvPath);
  /// ingest() of each of `drvPaths`, in one transaction whose statements
  /// are few: the derivations not yet known are looked up a level of the
  /// closures at a time, and the new steps and their dependencies inserted
  /// a few hundred per statement. A build whose closure holds a bad `.drv`
  /// or a cycle gets its error in its outcome and changes nothing; a
  /// database error throws (nothing of the batch is recorded or in the
  /// core then).
  std::vector<IngestOutcome> ingestAll(
      const std::vector<std::string>& drvPaths);
  /// How many builds the service ingests per ingestAll (a batch costs
  /// about 2 ms of the service thread on SQLite: the workers are served
  /// between batches).
  static constexpr size_t kBatch = 32;

  /// The parsed derivation at a full `.drv` path of the central store:
  /// from the prefetched map (useDrvs, checked there) or read, checked
  /// (readCheckedDrv) once and kept until the next useDrvs. Throws as
  /// ingest() does; a `.drv` whose outputs are not the ones its contents
  /// imply is a FormatError naming the output.
  std::shared_ptr<const store::Derivation> loadDrv(const std::string& drvPath);
  /// Derivations parsed off the service thread (prefetchDrvs) for the
  /// next ingestions; replaces the previous map and forgets what loadDrv
  /// read itself.
  void useDrvs(std::shared_ptr<const DrvMap> drvs);
  /// Whether every output of `drv` is valid in the central store.
  bool outputsValid(const store::Derivation& drv);
  /// The core's description of `drv` stored at `drvPath`.
  static StepSpec specOf(const std::string& drvPath,
                         const store::Derivation& drv);

 private:
  struct Node;
  struct Plan;
  void explore(Plan& plan, std::vector<std::string> frontier, int64_t nowMs);
  void planBuild(Plan& plan, const std::string& top, IngestResult& r);
  void recordPlan(Plan& plan, int64_t nowMs);
  void addPlanToCore(Plan& plan);
  void refreshFailedStep(StepId step, const std::string& drvPath,
                         int64_t nowMs);

  StateDb& db_;
  store::LocalStore& store_;
  SchedulerCore& core_;
  StepIndex index_;
  const Clock& clock_;
  std::shared_ptr<const DrvMap> prefetched_;
  DrvMap loaded_;
  /// Input derivations' hashes for readCheckedDrv, kept for the service's
  /// life (32 bytes per `.drv`): each is read and hashed once.
  store::DrvHashCache drvHashes_;
};

}  // namespace kiln::scheduler
