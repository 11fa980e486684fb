#pragma once
/// The scheduler service (design decisions 3-6, docs/scheduler.md): one
/// thread owns the policy core, the state database, the central store and
/// the ZeroMQ endpoint. It ingests builds, dispatches steps to workers,
/// serves their inputs, verifies and registers their outputs, persists
/// results, applies operator requests and runs evaluations on schedule.

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/common/clock.h"
#include "kiln/protocol/keys.h"
#include "kiln/protocol/transport.h"
#include "kiln/scheduler/core.h"
#include "kiln/scheduler/evaluation.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// Configuration of a service. Paths under `stateDir` (docs/operations.md):
/// `scheduler.sqlite`, `store/` + `db/` (the central store), `logs/`,
/// `tmp/`, `eval/`, `scheduler.lock`.
struct ServiceConfig {
  std::string stateDir;
  std::string storeDir = "/nix/store";
  std::string listen = "tcp://127.0.0.1:7470";
  bool insecurePlaintext = false;
  protocol::CurveKeyPair keys;      ///< unless insecurePlaintext
  protocol::AllowList allowed;      ///< worker keys allowed to join
  int metricsPort = -1;             ///< -1: no /metrics; 0: ephemeral
  std::chrono::milliseconds heartbeatInterval{10000};
  uint32_t chunkSize = 256 << 10;
  SchedulerConfig core;             ///< heartbeatTimeout is set by the service
  uint64_t logLimitBytes = 64ull << 20;
  uint64_t outputLimitBytes = 0;     ///< 0 = unlimited
  int64_t cachedFailureTtlSec = 0;   ///< 0 = until cleared
  /// Which evaluator the default runner uses: "kiln" (`kiln eval --json`
  /// into the central store) or "nix-instantiate" (the Nix adapter).
  std::string evaluator = "kiln";
  /// The `kiln` executable the "kiln" evaluator runs ("" = `kiln` on PATH).
  std::string kilnBinary;
  /// Evaluation runner and input fetcher; defaults when null.
  std::shared_ptr<EvalRunner> evalRunner;
  std::shared_ptr<InputFetcher> inputFetcher;
  /// The service's time (loop timers, durations, timestamps, the core).
  /// Not owned; must outlive the service. Null: RealClock::instance().
  const Clock* clock = nullptr;
  /// The worker connections. Null: a ZeroMQ `protocol::Server` bound to
  /// `listen` (with `insecurePlaintext`, `keys`, `allowed`); tests pass a
  /// `protocol::MemoryTransport`.
  std::shared_ptr<protocol::ServerTransport> transport;
};

/// One waiting or running step, as `kiln queue` shows it.
struct QueueEntry {
  int64_t stepId = 0;
  std::string drvPath;
  std::string system;
  std::string state;   ///< "running", "ready", "waiting", "failed", ...
  std::string reason;  ///< the core's explanation
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
  /// The `/metrics` port, or -1.
  int metricsPort() const;

  /// Serves until `stop` becomes true (checked at least every 100 ms).
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
  /// Why each unfinished step waits (running ones included).
  std::vector<QueueEntry> queue() const;
  /// The state database (read it from the service's thread only).
  StateDb& db();
  /// The core's gauges and counters.
  SchedulerMetrics coreMetrics() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Applies a request without a running scheduler (directly to the
/// database); `queue` then lists unfinished steps from the database. The
/// caller must hold the scheduler lock (see `withSchedulerLock`).
nlohmann::json applyRequestOffline(StateDb& db, const std::string& kind,
                                   const nlohmann::json& args);

/// Creates an evaluation ("manual" inputs) of `jobset` holding one
/// unfinished build of `drvPath`; returns the build row. The scheduler
/// ingests it (at once when live, at its next start otherwise). Throws
/// SchedulerStateError for an unknown jobset or a non-.drv path.
BuildRow createManualBuild(StateDb& db, int64_t jobset, const std::string& job,
                           const std::string& drvPath, int localPriority,
                           const Clock& clock = RealClock::instance());

/// Submits a request for the scheduler of `stateDir`: if no scheduler holds
/// `<state>/scheduler.lock`, applies it at once (holding the lock);
/// otherwise queues it in the requests table and waits up to `timeout` for
/// the scheduler's answer. Returns the result; throws Error with the
/// reason if it failed or timed out.
nlohmann::json submitRequest(const std::string& stateDir,
                             const std::string& kind,
                             const nlohmann::json& args,
                             std::chrono::milliseconds timeout =
                                 std::chrono::seconds(30));

}  // namespace kiln::scheduler
