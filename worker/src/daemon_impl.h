#pragma once
// Private state of the worker daemon (daemon.cc: connection and messages,
// daemon_steps.cc: steps, inputs, uploads).

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <variant>

#include "kiln/common/file.h"
#include "kiln/protocol/transfer.h"
#include "kiln/store/local_store.h"
#include "kiln/worker/build_runner.h"
#include "kiln/worker/daemon.h"
#include "kiln/worker/endpoint_list.h"
#include "slot.h"
#include "upload_journal.h"

namespace kiln::worker {

/// A step from BuildStep to its acknowledged StepResult.
struct Step {
  Step() = default;
  Step(const Step&) = delete;
  Step& operator=(const Step&) = delete;
  /// Waits for its direct uploads' threads (bounded by curl's stall
  /// timeout).
  ~Step() {
    for (auto& t : uploaders)
      if (t.joinable()) t.join();
  }
  enum class Phase { kFetching, kBuilding, kUploading, kReporting };
  protocol::BuildStep msg;
  BuildRequest request;
  Phase phase = Phase::kFetching;
  std::set<store::StorePath> missing;  ///< inputs not valid yet
  CancelFlag cancel;
  std::thread thread;
  protocol::StepResult result;
  size_t uploadsLeft = 0;
  std::string uploadError;
  /// A successful build's result and outputs (in upload order), kept
  /// until the scheduler acknowledges the step's result, so that a
  /// restarted scheduler that adopts the step gets them uploaded again.
  std::optional<protocol::StepResult> built;
  std::vector<protocol::BuiltOutput> builtOutputs;
  /// Not adopted by the scheduler: dropped, without a result, once its
  /// build ends.
  bool dropped = false;
  /// Direct uploads: outputs waiting for their StageGrant (by name) and
  /// the threads staging them.
  std::map<std::string, PreparedOutput> awaitingGrant;
  std::vector<std::thread> uploaders;
  /// Direct uploads: the outputs staged (the OutputStaged sent, by name),
  /// re-announced instead of uploaded again when a scheduler adopts the
  /// step (docs/protocol.md "Direct uploads").
  std::map<std::string, protocol::OutputStaged> staged;
  /// Direct uploads a restarted worker found in its journal, unfinished
  /// (by output name): resumed, not compressed nor uploaded again.
  std::map<std::string, JournaledOutput> resumable;
};

/// Slot thread → socket thread.
struct LogEvent {
  uint64_t stepId;
  std::string data;
};
struct DoneEvent {
  uint64_t stepId;
  SlotOutcome outcome;
};
/// A direct upload's thread → socket thread: the object is staged (or
/// `error`).
struct StagedEvent {
  uint64_t stepId;
  protocol::OutputStaged staged;
  std::string error;
};
using Event = std::variant<LogEvent, DoneEvent, StagedEvent>;

struct Daemon::Impl {
  Impl(Daemon& self, DaemonConfig config);

  // daemon.cc
  void loop();
  /// One turn of loop() (Daemon::turn).
  void turn();
  /// One message from the scheduler, or nullopt after up to 20 ms (at
  /// once when a step thread or stop() signals `eventsWake`).
  std::optional<protocol::Message> receive();
  void checkConnection();
  /// With several schedulers: moves to the next one if the current one
  /// was lost (`lost`) or has not answered within `failoverAfter`, and
  /// connects to it once its pause is over.
  void checkFailover(bool lost);
  /// Leaves the current scheduler (`why` for the log): aborts the
  /// connection's transfers, drops its unsent messages and closes it.
  /// Held steps stay for the next Hello.
  void followNext(const std::string& why);
  /// A client for endpoints.current(), with `cfg.client`'s keys; throws
  /// as protocol::Client does.
  std::unique_ptr<protocol::ClientTransport> connectCurrent();
  void sendHello();
  void handle(const protocol::Message& msg);
  void onWelcome(const protocol::Welcome& w);
  void sendHeartbeat();
  void send(protocol::Message&& msg);
  void shutdown(const std::string& why);

  // daemon_steps.cc
  void onBuildStep(const protocol::BuildStep& m);
  void onCancel(const protocol::CancelStep& m);
  void onAck(const protocol::Ack& a);
  void onInputReceived(const protocol::TransferOutcome& o);
  /// The input closure of `s` (its roots and everything they reference,
  /// from the step's PathInfos or this worker's store) into
  /// `s.request.inputClosure`, and what of it is not valid here into
  /// `s.missing`. A path neither knows is missing; once fetched, planning
  /// again reaches its references.
  void planInputs(Step& s);
  /// The references of `path` if it is valid in this worker's store
  /// (cached: a worker's store only grows while it runs), else nullptr.
  const std::vector<store::StorePath>* localReferences(
      const store::StorePath& path);
  void startBuild(Step& s);
  void drainEvents();
  void onDone(DoneEvent& d);
  /// Uploads `outputs` for `s`, then reports its result.
  void startUploads(Step& s, std::vector<PreparedOutput> outputs);
  /// Uploads output `o` of `s` over the connection (UploadOutput).
  void uploadOverConnection(Step& s, PreparedOutput o);
  /// Output `out` of `s` is uploaded (or failed: `error`); reports the
  /// result after the last one.
  void outputDone(Step& s, const protocol::BuiltOutput& out,
                  const std::string& error);
  // direct uploads (daemon_direct.cc)
  /// The StageRequest of output `output` of `s`: resuming its journaled
  /// multipart upload if it has one.
  protocol::StageRequest stageRequest(Step& s, const std::string& output,
                                      const protocol::PathInfo& info);
  void onStageGrant(const protocol::StageGrant& g);
  void onStaged(StagedEvent& e);
  /// Acks of StageRequest (refused: upload over the connection instead)
  /// and OutputStaged.
  void onStageAck(Step& s, const protocol::Ack& a);
  /// At start: the steps the upload journal holds (a successful build
  /// whose outputs were going up when the process ended), held again as
  /// results, so that the scheduler may take them back.
  void restoreJournal();
  /// The staging of output `out` of step `g.stepId` under `g`, on the
  /// calling (uploader) thread: resumes `resume` when it still can.
  protocol::OutputStaged stage(const protocol::StageGrant& g,
                               const PreparedOutput& out, bool corrupt,
                               const std::optional<JournaledOutput>& resume);
  /// Journals `s`'s successful build before its outputs go up directly.
  void journalStep(Step& s);
  /// Removes step `it` (and its journal).
  void eraseStep(std::map<uint64_t, std::unique_ptr<Step>>::iterator it);
  /// After a Welcome: keeps the steps the scheduler adopted (resuming what
  /// the old connection cut short) and drops the others.
  void reconcile(const std::vector<uint64_t>& adopted);
  /// Resumes adopted step `s`: asks again for missing inputs, uploads a
  /// kept build again, or reports its result again.
  void resume(Step& s);
  void finish(Step& s, protocol::StepStatus status, const std::string& error);
  void report(Step& s);
  std::unique_ptr<protocol::TransferTarget> acceptInput(
      const protocol::TransferHeader& h, bool upload);

  Daemon& self;
  DaemonConfig cfg;
  /// The injected clock (DaemonConfig::clock).
  const Clock& clock;
  std::shared_ptr<PressureSource> pressure;
  store::LocalStore store;
  std::string tmpDir;
  std::string drvDir;
  /// Starts builders: the sandbox plugin DaemonConfig::sandbox names, or
  /// DaemonConfig::launcher unsandboxed.
  std::shared_ptr<Sandbox> sandbox;
  /// Run builders of each system (DaemonConfig::platforms).
  std::shared_ptr<Platforms> platforms;
  BuildRunner runner;
  /// The schedulers (DaemonConfig::schedulers or `client.connect`).
  EndpointList endpoints;
  /// The connection to endpoints.current(); null while pausing between
  /// two rounds of the endpoints (until `connectAt`).
  std::unique_ptr<protocol::ClientTransport> client;
  /// When the pause before the next try ends (while `client` is null).
  Clock::TimePoint connectAt;
  /// When the current wait for an answer began (the try's connection, or
  /// the first Hello of a wait for a Welcome): with several schedulers,
  /// the worker moves on `failoverAfter` later.
  Clock::TimePoint attemptSince;
  std::unique_ptr<protocol::TransferEndpoint> xfer;
  /// The journal of direct uploads (`<stateDir>/direct`).
  std::unique_ptr<UploadJournal> journal;

  bool wasConnected = false;
  bool helloPending = false;
  Clock::TimePoint helloSentAt;
  std::chrono::milliseconds helloDelay;
  std::chrono::milliseconds heartbeatEvery{10000};
  Clock::TimePoint lastHeartbeat;
  uint32_t chunkSize = 256 << 10;

  std::map<uint64_t, std::unique_ptr<Step>> steps;
  std::map<uint64_t, uint64_t> transferSteps;  ///< input transfer → step
  /// localReferences' cache, by base name.
  std::unordered_map<std::string, std::vector<store::StorePath>> validRefs;

  std::mutex eventsMutex;
  std::deque<Event> events;
  /// An eventfd the step threads signal after queueing an event, so the
  /// loop handles a finished build at once instead of at its next
  /// receive timeout.
  AutoCloseFD eventsWake;
  /// Queues `e` from a step thread and wakes the loop.
  void postEvent(Event e);
};

}  // namespace kiln::worker
