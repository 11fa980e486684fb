#pragma once
/// The scheduler service (design decisions 3-6, docs/scheduler.md): one
/// thread owns the policy core, the state database, the central store and
/// the ZeroMQ endpoint. It ingests builds, dispatches steps to workers,
/// serves their inputs, verifies and registers their outputs, persists
/// results, applies operator requests and runs evaluations on schedule.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace prometheus {
class Registry;
}

#include "kiln/common/clock.h"
#include "kiln/common/disk_space.h"
#include "kiln/protocol/keys.h"
#include "kiln/protocol/transport.h"
#include "kiln/scheduler/build_events.h"
#include "kiln/scheduler/core.h"
#include "kiln/scheduler/diffoscope.h"
#include "kiln/scheduler/evaluation.h"
#include "kiln/scheduler/log_store.h"
#include "kiln/scheduler/offline_requests.h"
#include "kiln/scheduler/request_queue.h"
#include "kiln/scheduler/requests.h"
#include "kiln/scheduler/scheduler_lock.h"
#include "kiln/scheduler/snapshot.h"
#include "kiln/scheduler/state_db.h"
#include "kiln/store/signature.h"

namespace kiln::scheduler {

/// Configuration of a service. Paths under `stateDir` (docs/operations.md):
/// `scheduler.sqlite`, `store/` + `db/` (the central store), `logs/`,
/// `tmp/`, `eval/`, `scheduler.lock`.
struct ServiceConfig {
  std::string stateDir;
  /// The state database: PostgreSQL when databaseUrl is set (the password
  /// from databasePasswordFile or PGPASSFILE), else `scheduler.sqlite`.
  std::string databaseUrl;
  std::string databasePasswordFile;
  /// The farm's scheduler lock, already taken (a standby that waited for
  /// it); null: the service takes it, and refuses to start if another
  /// process holds it.
  std::shared_ptr<SchedulerLock> heldLock;
  /// PostgreSQL: how long a statement of the scheduler's loop (its state
  /// connection once started, the farm lock's) may wait for the server
  /// before it fails as if the connection were lost and the loop goes on
  /// from memory (`--database-timeout-ms`). Startup and ingestion batches
  /// wait longer (kBulkQueryTimeout, kIngestQueryTimeout).
  std::chrono::milliseconds databaseTimeout = kLoopQueryTimeout;
  /// The database these name.
  DatabaseSpec database() const {
    return DatabaseSpec::inStateDir(stateDir, databaseUrl,
                                    databasePasswordFile);
  }
  /// database(), its statements bounded by databaseTimeout (the lock's).
  DatabaseSpec loopDatabase() const {
    DatabaseSpec s = database();
    s.queryTimeout = databaseTimeout;
    return s;
  }
  std::string storeDir = "/nix/store";
  std::string listen = "tcp://127.0.0.1:7470";
  bool insecurePlaintext = false;
  protocol::CurveKeyPair keys;  ///< unless insecurePlaintext
  protocol::AllowList allowed;  ///< worker keys allowed to join
  std::chrono::milliseconds heartbeatInterval{10000};
  uint32_t chunkSize = 256 << 10;
  SchedulerConfig core;  ///< heartbeatTimeout is set by the service
  uint64_t logLimitBytes = 64ull << 20;
  uint64_t outputLimitBytes = 0;  ///< 0 = unlimited
  // Limits on what workers may make the scheduler hold (docs/operations.md,
  // "Limits"); 0 = unlimited where noted.
  /// Largest message (each ZeroMQ frame) a worker may send; a larger one
  /// makes ZeroMQ drop the connection before it is buffered.
  size_t maxMessageBytes = 32 << 20;
  /// Uploads one connection may have receiving at once, and announced ones
  /// waiting behind them; one more is refused ("too many transfers
  /// waiting").
  size_t maxConcurrentUploads = 4;
  size_t maxQueuedUploads = 256;
  /// Connections of one worker key (of one workerId without CURVE), and
  /// the slots they announce together (0 = unlimited): a Hello beyond
  /// either is Refused.
  size_t maxConnectionsPerKey = 16;
  uint32_t maxSlotsPerKey = 0;
  /// An upload is refused unless twice its NAR size (the temporary file,
  /// then the store's copy) plus this reserve is free under the state
  /// directory.
  uint64_t minFreeDiskBytes = 256ull << 20;
  /// A running step with no result by its timeout plus this margin is
  /// taken back from its worker (CancelStep) and fails as timed out.
  std::chrono::seconds stepDeadlineMargin{600};
  /// After a restart, how long a step that was dispatched and not settled
  /// waits for its worker to report it still runs it (adoption) before it
  /// is dispatched again; 0 = three heartbeat intervals.
  std::chrono::milliseconds adoptionGrace{0};
  /// On PostgreSQL, how often the requests table is read while the
  /// request listener is connected (a safety net: a queued request
  /// notifies it and wakes the loop at once, LISTEN/NOTIFY). Without a
  /// listener (SQLite; PostgreSQL while it reconnects) the table is read
  /// every 100 ms.
  std::chrono::milliseconds requestSafetyPoll{2000};
  /// What of the build logs in the state database is removed (log_store.h:
  /// pieces of ended attempts, finished logs past an age), checked every
  /// logPruneInterval (zero: never; the first check at the start): on
  /// PostgreSQL by the log mirror's thread, on SQLite (whose tables hold
  /// logs only when copied from PostgreSQL) by the loop.
  LogRetention logRetention;
  std::chrono::milliseconds logPruneInterval{std::chrono::minutes(10)};
  /// The farm's binary cache (cache_publisher.h): a cache URI
  /// (store::openCacheStorage: `s3://BUCKET?endpoint=…`, `file:///DIR`)
  /// that every verified and registered output is published to, its
  /// closure first, compressed with `cacheCompression` and signed with
  /// `cacheSigningKey`. Empty: none (the web front end compresses from the
  /// central store on request).
  std::string cacheUri;
  std::string cacheCompression = "zstd";
  std::optional<store::SecretKey> cacheSigningKey;
  /// Direct uploads (docs/protocol.md "Direct uploads"; needs an `s3://`
  /// cacheUri): a worker that asks (StageRequest) gets presigned URLs
  /// under `staging/` of the bucket and PUTs its compressed output there;
  /// a verifier thread checks it (direct_uploads.h), publishes it and adds
  /// it to the central store before the output counts as uploaded.
  bool directUploads = false;
  /// Objects up to this size (the NAR size plus codec overhead) get one
  /// presigned PUT; larger ones a multipart upload in parts of this size.
  uint64_t directPartBytes = 64ull << 20;
  /// How long the presigned URLs of a grant stay valid.
  std::chrono::seconds directGrantExpiry{3600};
  /// Verifier threads of direct uploads (1..64); 0: min(2, cores).
  unsigned directVerifyThreads = 0;
  /// The central store hashes a verified direct upload's NAR again when
  /// it adds it (as before the verifier handed its hash over); only for
  /// bench/direct_upload_bench's before/after figures.
  bool directRehash = false;
  /// Whether uploads are fsynced file by file into the central store
  /// before they are registered (store::LocalStore::ContentSync); false is
  /// Nix's default (`kiln build` without --fsync-store).
  bool syncStoreFiles = true;
  /// Free space of the state directory. Not owned; must outlive the
  /// service. Null: RealDiskSpace::instance().
  const DiskSpace* diskSpace = nullptr;
  int64_t cachedFailureTtlSec = 0;  ///< 0 = until cleared
  /// Makes the reports of reproducibility checks that found a difference
  /// (docs/release.md). Null: Debian's `diffoscope` (DiffoscopeDiffer).
  std::shared_ptr<Differ> repeatDiffer;
  /// How long the side location of a check that found a difference, or
  /// whose second build failed (its NARs and log), is kept once its report
  /// is stored; a `same` check's goes at once. Checked every
  /// repeatPruneInterval (zero: never; the first check at the start), off
  /// the loop's disk (BackgroundRemover).
  std::chrono::seconds keepRepeatNars{std::chrono::hours(24 * 30)};
  std::chrono::milliseconds repeatPruneInterval{std::chrono::minutes(10)};
  /// How long a check that a worker refused (it holds the outputs) waits
  /// for another worker when none that may build it is connected (one
  /// whose Hello is not read yet, or that restarts), before it ends
  /// `failed`; zero: it fails at once.
  std::chrono::milliseconds refusedCheckWait{std::chrono::seconds(60)};
  /// The `kiln` executable the "builtin" evaluator plugin runs ("" =
  /// `kiln` on PATH); its configuration key `kiln` unless set there.
  std::string kilnBinary;
  /// Where the evaluator plugins come from (not owned; must outlive the
  /// service). Null: the process's (plugins::processPlugins()). A jobset's
  /// evaluator (JobsetSpec::evaluator) names one ("builtin" and "nix" in
  /// the tree): jobset-create/jobset-update refuse a name none has, and
  /// an evaluation of a jobset whose plugin is gone fails, naming what
  /// is loaded.
  const plugins::PluginRegistry* plugins = nullptr;
  /// Configuration of each evaluator plugin, by name.
  std::map<std::string, plugins::PluginConfig> evaluatorConfig;
  /// Runners that replace the plugin of the same name (tests).
  std::map<std::string, std::shared_ptr<EvalRunner>> evalRunners;
  /// If set, evaluates every jobset whatever its evaluator (tests).
  std::shared_ptr<EvalRunner> evalRunner;
  /// Evaluations run on `kiln evaluator` hosts (evaluator_role.h): this
  /// scheduler starts none, leaves `jobset-eval` requests to them and
  /// imports and records the results they publish.
  bool remoteEvaluations = false;
  /// The largest evaluated checkout kept as an evaluation's `source` path
  /// (NAR bytes), local or imported from an evaluator host; larger ones
  /// are logged and the evaluation stands without its sources.
  uint64_t maxSourceBytes = uint64_t{1} << 30;
  /// How long after a forge said a pull request closed its jobset's
  /// unfinished builds are cancelled (docs/ci.md).
  std::chrono::milliseconds pullCloseGrace{std::chrono::minutes(10)};
  /// The input fetcher; the real one when null.
  std::shared_ptr<InputFetcher> inputFetcher;
  /// The service's time (loop timers, durations, timestamps, the core).
  /// Not owned; must outlive the service. Null: RealClock::instance().
  const Clock* clock = nullptr;
  /// The worker connections. Null: a ZeroMQ `protocol::Server` bound to
  /// `listen` (with `insecurePlaintext`, `keys`, `allowed`); tests pass a
  /// `protocol::MemoryTransport`.
  std::shared_ptr<protocol::ServerTransport> transport;
  /// Further receivers of build events (notifiers, a live feed), after
  /// the database; called on the service thread (build_events.h).
  std::vector<std::shared_ptr<BuildEventSink>> eventSinks;
  /// The Prometheus registry the service's metric families go into; the
  /// web module serves it on `/metrics` (with the store's and the HTTP
  /// requests'). Null: a registry of the service's own.
  std::shared_ptr<prometheus::Registry> metricsRegistry;
};

/// The running scheduler. Construction opens the state (migrating it),
/// takes `<state>/scheduler.lock` (Error if another scheduler holds it),
/// rebuilds the DAG from the unfinished builds and binds the endpoint.
class SchedulerService {
 public:
  explicit SchedulerService(ServiceConfig config);
  ~SchedulerService();
  SchedulerService(const SchedulerService&) = delete;
  SchedulerService& operator=(const SchedulerService&) = delete;

  /// The bound ZeroMQ endpoint (real port).
  std::string endpoint() const;
  /// The registry holding the service's metrics (ServiceConfig's, or its
  /// own); scraping it is thread-safe.
  std::shared_ptr<prometheus::Registry> metricsRegistry() const;

  /// Serves until `stop` becomes true (checked at least every 100 ms).
  /// Throws Error if another scheduler took the farm's lock (PostgreSQL:
  /// after this one's lock connection was lost).
  void run(const std::atomic<bool>& stop);
  /// One iteration: waits up to `timeout` for a message, handles what
  /// arrived, applies requests, evaluates due jobsets, dispatches.
  void pollOnce(std::chrono::milliseconds timeout);

  // ---- the library API (also reachable through the requests table) ------

  /// Creates a build of `drvPath` (valid in the central store) in a fresh
  /// evaluation of `jobset` and ingests it; returns the build id.
  int64_t addBuild(int64_t jobset, const std::string& job,
                   const std::string& drvPath, int localPriority = 0);
  /// Evaluates a jobset now (even if its inputs did not change when
  /// `force`); returns the evaluation id, or 0 if nothing changed.
  int64_t evaluateJobset(int64_t jobset, bool force);
  /// Applies one operator request (see docs/scheduler.md) and returns its
  /// JSON result; throws Error with the reason on failure.
  nlohmann::json applyRequest(const std::string& kind,
                              const nlohmann::json& args);
  /// The request handlers (name → argument schema → handler) that
  /// applyRequest and the requests table use: the web's write API.
  const RequestTable& requests() const;
  /// Why each unfinished step waits (running ones included).
  std::vector<QueueEntry> queue() const;
  /// The newest published snapshot (empty, takenMs 0, before the first
  /// turn). Thread-safe; never makes the service thread work. The service
  /// republishes it at the end of each loop turn that changed what it
  /// shows (throttled only when making it would take over 2 % of the
  /// loop's time), before a joining worker's Welcome, and before the
  /// answers of the requests it applied; a snapshot that only grew old
  /// (workers' last-seen stamps) is renewed once read, at most once per
  /// `kSnapshotInterval`.
  std::shared_ptr<const SchedulerSnapshot> snapshot() const;
  static constexpr std::chrono::milliseconds kSnapshotInterval{1000};
  /// The state database (read it from the service's thread only).
  StateDb& db();
  /// The core's gauges and counters.
  SchedulerMetrics coreMetrics() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// submitRequest (request_queue.h) checking, when it applies the request
/// itself, a jobset's new evaluator against the process's evaluator
/// plugins (plugins::processPlugins(), loadedEvaluatorCheck).
nlohmann::json submitRequest(
    const std::string& stateDir, const std::string& kind,
    const nlohmann::json& args,
    std::chrono::milliseconds timeout = kRequestTimeout);
nlohmann::json submitRequest(
    const DatabaseSpec& database, const std::string& stateDir,
    const std::string& kind, const nlohmann::json& args,
    std::chrono::milliseconds timeout = kRequestTimeout);

}  // namespace kiln::scheduler
