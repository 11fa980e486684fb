#pragma once
/// The scheduler's persistent state (design decision 3): projects, jobsets,
/// evaluations, builds, steps, build outputs, cached failures and the
/// operator request queue, in SQLite (`<state>/scheduler.sqlite`, WAL) or
/// PostgreSQL (`--database postgresql://…`), through one SqlConnection
/// (sql.h), with numbered migrations for each. Only the scheduler writes
/// it; the one exception is `requests`, where CLI commands and web front
/// ends insert rows the scheduler applies (docs/scheduler.md,
/// "Operations"). Status numbers are Hydra's.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/common/error.h"
#include "kiln/scheduler/jobset.h"
#include "kiln/scheduler/sql.h"

namespace kiln::scheduler {

/// A project: a named group of jobsets.
struct ProjectRow {
  int64_t id = 0;
  std::string name;
  std::string description;
  bool enabled = true;
};

/// A jobset: where a collection lives and how it is evaluated (the
/// JobsetSpec an evaluator sees), and how the scheduler schedules it.
struct JobsetRow : JobsetSpec {
  int64_t project = 0;
  int64_t checkIntervalSec = 300;  ///< 0 = only on demand
  int64_t shares = 100;            ///< scheduling shares (fairness)
  bool enabled = true;
  int64_t lastCheckedMs = 0;  ///< last evaluation attempt (Unix ms)
  std::string lastInputs;     ///< inputs hash of the last evaluation
  /// The job whose success advances the jobset's channel (docs/release.md;
  /// a job name as isChannelJobName accepts).
  std::string channelJob = "tested";
  /// Regression gates (docs/release.md): the most a job's closure size and
  /// build time may grow (percent) against the channel's evaluation before
  /// an evaluation is held as regressed; 0 = not checked.
  int64_t maxClosureGrowthPct = 0;
  int64_t maxBuildTimeGrowthPct = 0;
  /// Reproducibility checks (docs/release.md): the share of its successful
  /// steps built a second time, in parts per million (0 = none, at most
  /// kRepeatPpmScale; repeat_check.h converts from a fraction).
  int64_t repeatPpm = 0;
};

/// Whether `name` can be a channel job: 1 to 200 bytes, no control
/// characters (a job's attribute path, e.g. `tested` or `release.tested`).
bool isChannelJobName(const std::string& name);

/// One evaluation of a jobset.
struct EvaluationRow {
  int64_t id = 0;
  int64_t jobset = 0;
  std::string inputsHash;  ///< git revision or content hash of the folder
  int64_t timeMs = 0;
  int64_t durationMs = 0;
  int64_t jobs = 0;   ///< builds created
  std::string error;  ///< evaluation-wide error ("" if none)
};

/// A per-job evaluation error.
struct EvalErrorRow {
  std::string attr;
  std::string error;
};

/// A build: one job of one evaluation.
struct BuildRow {
  int64_t id = 0;
  int64_t eval = 0;
  int64_t jobset = 0;
  std::string job;      ///< attribute path
  std::string nixName;  ///< derivation name
  std::string system;
  std::string drvPath;  ///< full logical path
  bool finished = false;
  int status = -1;  ///< Hydra status; -1 while unfinished
  int globalPriority = 0;
  int localPriority = 0;
  int64_t createdMs = 0;
  int64_t stopMs = 0;
  std::string error;
  int64_t reusedFrom = 0;  ///< earlier build whose result this one reuses
  /// Limits from the job's meta (seconds; 0 = none). A step runs with the
  /// limits of its owner build (the lowest build id needing it).
  int64_t maxSilentSec = 3600;
  int64_t timeoutSec = 36000;
};

/// A step: one derivation, shared between builds.
struct StepRow {
  int64_t id = 0;
  std::string drvPath;
  std::string system;
  std::string pname;
  std::vector<std::string> features;  ///< requiredSystemFeatures
  bool finished = false;
  int status = -1;
  std::string error;
  int64_t attempts = 0;
  std::string worker;  ///< last worker it ran on
  int64_t createdMs = 0;
  int64_t startMs = 0;
  int64_t stopMs = 0;
  /// What its last attempt used (docs/worker.md, "Limits per build");
  /// 0: not measured.
  int64_t peakMemoryBytes = 0;
  int64_t cpuTimeUs = 0;
  int64_t buildDirBytes = 0;
};

/// A cached failure: a derivation that failed for good.
struct CachedFailureRow {
  std::string drvPath;
  int status = 1;
  int64_t timeMs = 0;
  int64_t expiresMs = 0;  ///< 0 = never
};

/// A queued operator request (see docs/scheduler.md, "Operations").
struct RequestRow {
  int64_t id = 0;
  std::string kind;  ///< e.g. "build-cancel"
  std::string args;  ///< JSON object
  bool done = false;
  bool ok = false;
  /// JSON: the result, or {"error": text, "caller": true if the request
  /// itself was wrong (SchedulerStateError)}.
  std::string result;
};

/// How many builds exist, are finished, succeeded.
struct BuildCounts {
  int64_t all = 0;
  int64_t finished = 0;
  int64_t succeeded = 0;
};

/// The channel StateDb::addRequest notifies (SqlConnection::notify) and
/// the scheduler listens on (listenForRequests, request_queue.h).
inline constexpr const char* kRequestsChannel = "kiln_requests";

/// Where a farm's state is: a PostgreSQL database, or the SQLite file
/// `<state-dir>/scheduler.sqlite`. Copied freely; holds no password.
struct DatabaseSpec {
  std::string url;           ///< postgresql://…; empty: SQLite at sqlitePath
  std::string passwordFile;  ///< PostgreSQL password file; "" = PGPASSFILE
  std::string sqlitePath;    ///< the SQLite file when url is empty
  /// PostgreSQL: how long a statement may wait for the server
  /// (SqlConnection::setQueryTimeout).
  std::chrono::milliseconds queryTimeout = kBulkQueryTimeout;

  /// The state of `stateDir`: `url` when given, else its SQLite file.
  static DatabaseSpec inStateDir(const std::string& stateDir,
                                 const std::string& url = "",
                                 const std::string& passwordFile = "");
  bool isPostgres() const { return !url.empty(); }
  /// The URL or the file, for messages.
  const std::string& describe() const { return url.empty() ? sqlitePath : url; }
  /// A new connection. Throws SqlError.
  std::unique_ptr<SqlConnection> connect(SqlAccess access) const;
};

/// Typed access to the scheduler database. One connection; not thread-safe.
/// Every failure throws SqlError (database; transient() when repeating
/// the transaction may work), SchemaError (a schema this kiln does not
/// read) or SchedulerStateError (an unknown name or id, a constraint the
/// caller broke).
class StateDb {
 public:
  /// Opens or creates the SQLite file `path`, applying the migrations.
  /// SchemaError if the file was made by a newer kiln.
  explicit StateDb(const std::string& path);
  /// Opens `spec` for writing. SQLite: creates the file, applies the
  /// migrations. PostgreSQL: creates the schema in an empty database, but
  /// leaves an older one to `kiln db migrate` (other hosts may still run
  /// the kiln it belongs to) and throws SchemaError saying so.
  explicit StateDb(const DatabaseSpec& spec);
  /// Access to an existing database without migrating it (SQLite: its own
  /// read-only connection, which in WAL mode never blocks the writer;
  /// PostgreSQL: an ordinary connection). SqlError if it is missing or
  /// unreachable, SchemaError if its schema is not this kiln's (saying
  /// which version each has and what to run).
  struct ReadOnly {};
  StateDb(const std::string& path, ReadOnly);
  StateDb(const DatabaseSpec& spec, ReadOnly);
  /// As ReadOnly, but the connection writes too (for the delivery thread,
  /// web front ends, CLI commands that queue requests).
  struct Existing {};
  StateDb(const DatabaseSpec& spec, Existing);
  /// Brings `spec` to this kiln's schema (`kiln db migrate`); returns the
  /// version it had. SchemaError if it is newer than this kiln.
  static int64_t migrate(const DatabaseSpec& spec);
  /// The schema version `spec` has (0: none yet), on a connection of its
  /// own. SqlError if it is unreachable (SQLite: missing).
  static int64_t storedVersion(const DatabaseSpec& spec);

  /// The schema version this code migrates to.
  static int64_t schemaVersion();
  /// The connection: for the state layer's own code, tests and
  /// backend-only settings (the service turns off SQLite's automatic WAL
  /// checkpoints); writes go through the typed methods, grouped by a
  /// Transaction.
  SqlConnection& db() { return *db_; }
  /// Which backend this is.
  SqlDialect dialect() const { return db_->dialect(); }

  /// A write transaction on this database (RAII): begun on construction,
  /// taking the write lock up front (SQLite's BEGIN IMMEDIATE); commit()
  /// makes it durable; the destructor rolls it back if commit() was not
  /// called, so an exception leaves the state unchanged. Opened while
  /// another Transaction of the same StateDb is open (or a typed method
  /// runs one), it is a nested part of it: its commit keeps its changes
  /// for the outer one to commit, its rollback undoes only its own.
  class Transaction {
   public:
    /// Begins a transaction (or a nested one) on `db`, which must outlive
    /// it. Throws SqlError if the write lock cannot be had in time.
    explicit Transaction(StateDb& db);
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    /// Commits (a nested one: keeps its changes in the outer one).
    void commit();

   private:
    SqlConnection::Txn txn_;
  };

  // -------------------------------------------------- projects and jobsets
  /// Inserts a project; throws if the name is taken or invalid.
  int64_t createProject(const ProjectRow& p);
  std::optional<ProjectRow> projectByName(const std::string& name);
  /// Inserts a jobset (project must exist, name unique in it).
  int64_t createJobset(const JobsetRow& j);
  /// Replaces the declaration of jobset `j.id` (kind, location, branch,
  /// file, attribute, arguments, check interval, shares, enabled,
  /// evaluator); its name, project and history stay. Throws
  /// SchedulerStateError if it is invalid or no such jobset exists.
  void updateJobset(const JobsetRow& j);
  /// Rewrites project `p.id`'s description and enabled flag; throws
  /// SchedulerStateError if there is none.
  void updateProject(const ProjectRow& p);
  std::optional<JobsetRow> jobset(int64_t id);
  std::optional<JobsetRow> jobsetByName(const std::string& project,
                                        const std::string& name);
  std::vector<JobsetRow> jobsets();
  /// Records an evaluation attempt's time and (when it evaluated) inputs.
  void setJobsetChecked(int64_t id, int64_t timeMs,
                        const std::optional<std::string>& inputs);

  // ------------------------------------------------------------ evaluations
  int64_t createEvaluation(const EvaluationRow& e,
                           const std::vector<EvalErrorRow>& errors);
  std::optional<EvaluationRow> evaluation(int64_t id);
  std::vector<EvalErrorRow> evaluationErrors(int64_t eval);
  std::vector<EvaluationRow> evaluations(int64_t jobset);

  // ----------------------------------------------------------------- builds
  /// Inserts build `b` (its id is ignored); returns the new id.
  int64_t createBuild(const BuildRow& b);
  /// Inserts `builds` (ids ignored) as createBuild would, in a few
  /// multi-row statements; returns their new ids in the same order. Call
  /// it in a Transaction for all or none (one statement inserts up to 256).
  std::vector<int64_t> createBuilds(const std::vector<BuildRow>& builds);
  std::optional<BuildRow> build(int64_t id);
  /// Unfinished builds, oldest first.
  std::vector<BuildRow> unfinishedBuilds();
  std::vector<BuildRow> buildsOfEval(int64_t eval);
  /// Every build, by id.
  std::vector<BuildRow> allBuilds();
  /// Counts of the builds of evaluation `eval` (of all when 0).
  BuildCounts buildCounts(int64_t eval);
  /// Counts of the builds of `jobset` with ids in [firstId, lastId] (one
  /// indexed query, for progress over a run's contiguous builds).
  BuildCounts buildCountsInRange(int64_t jobset, int64_t firstId,
                                 int64_t lastId);
  /// The latest finished build of `drvPath`, if any (for result reuse).
  std::optional<BuildRow> finishedBuildOfDrv(const std::string& drvPath);
  /// finishedBuildOfDrv of each of `drvPaths` in a few statements, by
  /// derivation (those without a finished build are absent).
  std::map<std::string, BuildRow> finishedBuildsOfDrvs(
      const std::vector<std::string>& drvPaths);
  /// The unfinished builds whose top derivation is `drvPath`, by id.
  std::vector<BuildRow> unfinishedBuildsOfDrv(const std::string& drvPath);
  /// Marks a build finished with `status` (and error text).
  void finishBuild(int64_t id, int status, int64_t timeMs,
                   const std::string& error);
  /// Marks a finished build unfinished again (restart, revival).
  void reopenBuild(int64_t id);
  void setBuildPriority(int64_t id, int globalPriority);
  void setBuildOutputs(
      int64_t id,
      const std::vector<std::pair<std::string, std::string>>& nameToPath);
  std::vector<std::pair<std::string, std::string>> buildOutputs(int64_t id);

  // ------------------------------------------------------------------ steps
  /// Inserts the step of `s.drvPath` or returns the existing row's id.
  int64_t upsertStep(const StepRow& s);
  /// upsertStep of each row, a few hundred per statement: the ids, in the
  /// order of `rows` (an existing row's id for a path already recorded).
  std::vector<int64_t> insertSteps(const std::vector<StepRow>& rows);
  std::optional<StepRow> step(int64_t id);
  std::optional<StepRow> stepByDrv(const std::string& drvPath);
  /// The step whose derivation has base name `base` (`<hash>-<name>.drv`),
  /// in the store folder of the steps recorded (one per state database).
  std::optional<StepRow> stepByBaseName(const std::string& base);
  /// What the ingestor needs of a derivation before it makes its step.
  struct StepLookup {
    std::optional<StepRow> step;              ///< its row, if recorded
    std::optional<CachedFailureRow> failure;  ///< unexpired at `nowMs`
  };
  /// stepByDrv and cachedFailure of `drvPath` in one statement.
  StepLookup lookUpStep(const std::string& drvPath, int64_t nowMs);
  /// lookUpStep of each path, a few hundred per statement: every path of
  /// `drvPaths` is a key of the result.
  std::unordered_map<std::string, StepLookup> lookUpSteps(
      const std::vector<std::string>& drvPaths, int64_t nowMs);
  /// Records that `step` depends on `dep` (idempotent).
  void addStepDep(int64_t step, int64_t dep);
  /// addStepDep of each (step, dep), a few hundred per statement.
  void addStepDeps(const std::vector<std::pair<int64_t, int64_t>>& edges);
  /// The recorded dependencies of `step` (step ids).
  std::vector<int64_t> stepDeps(int64_t step);
  /// Unfinished steps, oldest first.
  std::vector<StepRow> unfinishedSteps();
  /// Every step, by id.
  std::vector<StepRow> allSteps();
  void startStep(int64_t id, const std::string& worker, int64_t timeMs);
  void finishStep(int64_t id, int status, int64_t timeMs,
                  const std::string& error);
  /// Records what the step's last attempt used (StepRow's usage fields).
  void setStepUsage(int64_t id, int64_t peakMemoryBytes, int64_t cpuTimeUs,
                    int64_t buildDirBytes);
  /// Marks a finished step unfinished (operator restart).
  void reopenStep(int64_t id);

  // -------------------------------------------------------- cached failures
  void addCachedFailure(const CachedFailureRow& f);
  /// The unexpired cached failure of `drvPath` at `nowMs`, if any.
  std::optional<CachedFailureRow> cachedFailure(const std::string& drvPath,
                                                int64_t nowMs);
  std::vector<CachedFailureRow> cachedFailures();
  /// Removes the cached failure of `drvPath` ("" = all); returns how many.
  int64_t clearCachedFailures(const std::string& drvPath);

  // --------------------------------------------------------------- requests
  /// Queues a request (the one write clients make) and notifies
  /// kRequestsChannel when it commits. Returns its id.
  int64_t addRequest(const std::string& kind, const std::string& args);
  /// Requests not yet applied, oldest first.
  std::vector<RequestRow> pendingRequests();
  std::optional<RequestRow> request(int64_t id);
  void completeRequest(int64_t id, bool ok, const std::string& result);

  /// Historical duration (seconds) of each package name: the mean of its
  /// last successful steps, for seeding the core's critical path.
  std::vector<std::pair<std::string, double>> historicalDurations();
  /// The last recorded peak memory (bytes) of each package name: its
  /// latest step that reported one, for seeding the core's placement.
  std::vector<std::pair<std::string, uint64_t>> lastPeaks();

 private:
  explicit StateDb(std::unique_ptr<SqlConnection> db) : db_(std::move(db)) {}
  /// Throws SchemaError unless the database is at schemaVersion().
  void requireCurrentSchema();

  std::unique_ptr<SqlConnection> db_;
};

/// A caller error against the state (unknown project, duplicate name...).
class SchedulerStateError : public Error {
 public:
  using Error::Error;
};

}  // namespace kiln::scheduler
