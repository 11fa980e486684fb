#pragma once
// Private state of SchedulerService (docs/scheduler.md). Everything here is
// touched only by the service thread, except the evaluation future's
// worker thread, which uses its own LocalStore and never the core.

#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <chrono>
#include <deque>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "evaluations.h"
#include "kiln/common/file.h"
#include "kiln/common/file_lock.h"
#include "kiln/common/sync.h"
#include "kiln/protocol/transfer.h"
#include "kiln/protocol/transport.h"
#include "kiln/scheduler/build_events.h"
#include "kiln/scheduler/checkpointer.h"
#include "kiln/scheduler/ingest.h"
#include "kiln/scheduler/metrics.h"
#include "kiln/scheduler/registrar.h"
#include "kiln/scheduler/requests.h"
#include "kiln/scheduler/service.h"

namespace kiln::scheduler {


// A connected worker.
struct Conn {
  std::string peer;
  std::string name;  // workerId from Hello (+ key name)
  WorkerId wid;
  protocol::Hello hello;
  std::unique_ptr<protocol::TransferEndpoint> xfer;
  /// Base names of paths this worker is known to hold (outputs it built,
  /// inputs it received), and so their closures: BuildStep leaves their
  /// metadata out. Reset when the worker says Hello again.
  std::unordered_set<std::string> present;
};

// A step running on a worker, by its database id.
struct Running {
  StepId sid;
  std::string peer;
  std::string drvPath;
  std::string system;
  std::map<std::string, store::StorePath> expected;  // output name → path
  std::set<std::string> uploaded;                     // output names
  std::set<std::string> registering;  // verified, being added to the store
  std::vector<store::StorePath> sentInputs;  // BuildStep's `inputs`
  /// The worker's result, held while outputs are still being registered.
  std::optional<protocol::StepResult> deferred;
  Clock::TimePoint started;
  int64_t attempt = 1;
  AutoCloseFD log;
  uint64_t logBytes = 0;
  bool logTruncated = false;
};

struct SchedulerService::Impl {
  explicit Impl(ServiceConfig c);

  ServiceConfig cfg;
  /// The injected clock (ServiceConfig::clock).
  const Clock& clock;
  FileLock lock;
  StateDb db;
  /// WAL checkpoints of `db` on a thread of their own (the service's
  /// connection never checkpoints).
  Checkpointer checkpointer;
  store::LocalStore store;
  /// The registrar thread's own handle on the same store.
  store::LocalStore registrarStore;
  Registrar registrar;
  /// Build events go to `sinks`: the database first, then
  /// ServiceConfig::eventSinks.
  std::shared_ptr<StateDbSink> dbSink;
  std::vector<std::shared_ptr<BuildEventSink>> sinks;
  SchedulerCore core;
  StepIndex index;
  Ingestor ingestor;
  /// The worker connections (ServiceConfig::transport, or ZeroMQ).
  std::shared_ptr<protocol::ServerTransport> server;
  std::shared_ptr<prometheus::Registry> registry;
  ServiceMetrics metrics;
  std::unique_ptr<prometheus::Exposer> exposer;
  std::map<std::string, Conn> conns;  // by ZeroMQ peer id
  std::map<WorkerId, std::string> peerOf;
  std::map<int64_t, Running> running;  // by db step id
  std::string schedulerId;
  std::optional<Clock::TimePoint> pendingSince;
  /// Start of the loop's current turn (ServiceMetrics::observeLoopTurn).
  Clock::TimePoint turnStart = clock.now();
  Clock::TimePoint lastRequestPoll{};
  Clock::TimePoint lastJobsetCheck{};
  /// Evaluations off the service thread (evaluations.h).
  std::unique_ptr<Evaluations> evaluations;
  /// Operator requests (operations.cc: the offline table, with the
  /// handlers that concern the core wrapped).
  RequestTable requests;
  /// The published snapshot (any thread reads it), whether a reader asked
  /// for a fresh one, and when the last was taken (service thread).
  mutable Sync<std::shared_ptr<const SchedulerSnapshot>> published{
      std::make_shared<const SchedulerSnapshot>()};
  mutable std::atomic<bool> snapshotWanted{false};
  Clock::TimePoint lastSnapshot{};
  uint64_t tmpCounter = 0;
  std::unordered_map<std::string, protocol::PathInfo> pathInfoCache;

  std::string tmpPath();

  // service.cc
  void restoreFromDb();
  void startBuild(const BuildRow& b);
  std::vector<std::pair<std::string, std::string>> outputsOf(
      const std::string& drvPath);
  /// Hands `ev` to every sink (exceptions logged).
  void announce(const BuildEvent& ev);
  void processEvents();
  void dispatch();
  void periodic();
  void pollRequests();
  nlohmann::json apply(const std::string& kind, const nlohmann::json& args);
  void setUpRequests();
  /// Publishes a snapshot if a reader asked and the last is old enough.
  void maybePublishSnapshot();
  void restartBuild(int64_t id);
  std::vector<QueueEntry> queueEntries();
  int64_t recordEvaluation(const EvalOutcome& o);
  std::vector<BuildRow> createBuilds(const EvalOutcome& o, int64_t evalId);
  void checkJobsets();
  /// Records an evaluation that ended and answers its request.
  void finishEvaluation(Evaluations::Finished& done);
  /// Answers request `id` with `e`'s message (marked as the caller's
  /// mistake for a SchedulerStateError).
  void failRequest(int64_t id, const std::exception& e);
  void queueEvalRequest(const RequestRow& req);

  // service_workers.cc
  void handle(const protocol::Received& r);
  void onHello(const std::string& peer, const std::string& user,
               const protocol::Hello& h);
  void onNeedPaths(Conn& c, const protocol::NeedPaths& n);
  void onLog(Conn& c, const protocol::LogChunk& l);
  void onResult(Conn& c, const protocol::StepResult& r);
  /// Settles running step `id` with the worker's result `r` (its uploads
  /// registered, or failed).
  void completeResult(int64_t id, const protocol::StepResult& r);
  /// Applies the registrar's reports; a held result whose last output is
  /// now registered is completed.
  void takeRegistrations();
  /// One turn of the loop: handles up to `max` waiting messages (each
  /// followed by events and dispatch), waiting up to `timeout` for the first.
  void serveMessages(std::chrono::milliseconds timeout, int max);
  /// Records the turn that ends now and starts the next.
  void endTurn();
  void dropWorker(const std::string& peer, const std::string& why,
                  bool removeFromCore);
  bool sendBuildStep(int64_t dbId, StepId sid, Conn& c);
  /// Fills `m.roots` with the direct inputs of `drv` and `m.inputs` with
  /// the metadata of their closure minus what `c` is known to hold.
  void planInputs(const store::Derivation& drv, const Conn& c,
                  protocol::BuildStep& m);
  /// Metadata of a valid central-store path, read from the database once:
  /// valid paths never change. (A path collected by a `kiln store gc` from
  /// outside stays cached; serving it to a worker then fails.)
  const protocol::PathInfo& cachedPathInfo(const store::StorePath& path);
  std::unique_ptr<protocol::TransferTarget> acceptUpload(
      const std::string& peer, const protocol::TransferHeader& h);
  void sendTo(const std::string& peer, protocol::Message&& m);
};

}  // namespace kiln::scheduler
