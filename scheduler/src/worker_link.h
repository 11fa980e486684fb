#pragma once
// The worker link of the scheduler service (docs/scheduler.md, "Workers";
// design decision 5): the connected workers over a
// protocol::ServerTransport. It checks each Hello (protocol version, store
// directory) and registers the worker with the core, applies heartbeats
// and Bye, asks workers it does not know (after a restart, after being
// declared lost) to say Hello again, drops lost workers and owns each
// connection's transfer endpoint. Everything about steps goes to its
// Handler. Service thread only; no exception leaves handle().

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/protocol/transfer.h"
#include "kiln/protocol/transport.h"
#include "kiln/scheduler/core.h"

namespace kiln::scheduler {

/// A connected worker.
struct WorkerConn {
  std::string peer;  ///< the transport's peer id
  std::string name;  ///< workerId from Hello (+ key name)
  std::string key;   ///< allow-list name of its key (workerId in plain text)
  WorkerId wid;      ///< the core's id
  protocol::Hello hello;
  /// When the scheduler last heard from it (Unix ms, any message).
  int64_t lastSeenMs = 0;
  std::unique_ptr<protocol::TransferEndpoint> xfer;
  /// Base names of paths this worker is known to hold (outputs it built,
  /// inputs it received), and so their closures: BuildStep leaves their
  /// metadata out. Reset when the worker says Hello again.
  std::unordered_set<std::string> present;
  /// Its last heartbeat (load, free disk, pressure), for the workers page.
  std::optional<protocol::Heartbeat> heartbeat;
};

/// What a heartbeat says about the worker's machine, for the core.
WorkerHealth healthOf(const protocol::Heartbeat& hb);
/// A heartbeat's figures for people: "load 1.5, memory/CPU/IO pressure
/// 3/10/0%, 12G free memory, 40G free disk" (unknown ones left out).
std::string healthText(const protocol::Heartbeat& hb);
/// A Hello's thresholds, for the core.
PressureLimits limitsOf(const protocol::PressureThresholds& t);

/// The connections of the scheduler to its workers. Borrows the core, the
/// clock and the handler, which must outlive it.
class WorkerLink {
 public:
  /// What the rest of the service does with what workers say.
  class Handler {
   public:
    virtual ~Handler() = default;
    /// NeedPaths, LogChunk, StepResult, StageRequest or OutputStaged from
    /// a known worker.
    virtual void onStepMessage(WorkerConn& from,
                               const protocol::Message& m) = 0;
    /// An upload `from` announces; throws Error to refuse it.
    virtual std::unique_ptr<protocol::TransferTarget> acceptUpload(
        const WorkerConn& from, const protocol::TransferHeader& h) = 0;
    /// The steps of `w`'s Hello (`heldSteps`) taken as running there:
    /// called before the Welcome that lists them, on every Hello.
    virtual std::vector<uint64_t> adoptHeldSteps(const WorkerConn& w) = 0;
    /// A worker joined: its slots are free. Called after its held steps
    /// were adopted and before its Welcome is sent, so whatever the worker
    /// does next happens after the service knew it joined.
    virtual void onWorkerJoined(const WorkerConn& w) = 0;
    /// A worker is leaving (Bye, lost, a changed Hello); `w` is still
    /// valid during the call, its transfers already aborted.
    virtual void onWorkerLeft(const WorkerConn& w) = 0;
  };

  /// What Welcome announces and Hello is checked against.
  struct Options {
    std::string storeDir;  ///< the logical store directory workers must use
    std::chrono::milliseconds heartbeatInterval{10000};
    uint32_t chunkSize = 256 << 10;
    std::string schedulerId;
    /// Per connection: uploads receiving at once, and waiting.
    size_t maxConcurrentUploads = 4;
    size_t maxQueuedUploads = 256;
    /// Per worker key: connections, and their slots together (0 =
    /// unlimited); a Hello beyond either is Refused.
    size_t maxConnectionsPerKey = 16;
    uint32_t maxSlotsPerKey = 0;
  };

  WorkerLink(std::shared_ptr<protocol::ServerTransport> transport,
             Options options, SchedulerCore& core, const Clock& clock,
             Handler& handler);

  /// The transport's endpoint (the real port when bound to `*`).
  std::string endpoint() const { return transport_->endpoint(); }
  /// Waits up to `timeout` for a message (or `wakeFd` readable).
  std::optional<protocol::Received> receive(std::chrono::milliseconds timeout,
                                            int wakeFd);
  /// Handles one message: Hello, Heartbeat, Bye and transfer messages
  /// here, step messages through the Handler. Logs what fails.
  void handle(const protocol::Received& r);
  /// Sends `m`; false if the worker is gone or its queue is full.
  bool send(const std::string& peer, const protocol::Message& m);
  /// Sends `m`, logging a warning if it cannot be sent.
  void sendOrWarn(const std::string& peer, const protocol::Message& m);
  /// The connection of `peer` / of core worker `w`, or nullptr.
  WorkerConn* find(const std::string& peer);
  WorkerConn* find(WorkerId w);
  /// Every connection, by peer id.
  const std::map<std::string, WorkerConn>& connections() const {
    return conns_;
  }
  /// Drops the workers the core declared lost (SchedulerCore::tick); the
  /// core already retries their steps.
  void dropLost(const std::vector<WorkerId>& lost);
  /// Expires idle transfers on every connection.
  void expireTransfers();

 private:
  void onHello(const std::string& peer, const std::string& user,
               const protocol::Hello& h);
  /// Whether Hello `h` describes the worker as `known` did.
  static bool sameDescription(const protocol::Hello& known,
                              const protocol::Hello& h);
  WorkerConn makeConnection(const std::string& peer, const std::string& name,
                            WorkerId wid, const protocol::Hello& h);
  /// Why a Hello of `h` on `peer` for key `key` exceeds the per-key
  /// limits, or "".
  std::string overKeyLimits(const std::string& peer, const std::string& key,
                            const protocol::Hello& h) const;
  /// Adopts `c`'s held steps, tells the handler of a worker that just
  /// `joined`, then sends Welcome listing them.
  void welcome(WorkerConn& c, bool joined);
  void drop(const std::string& peer, const std::string& why,
            bool removeFromCore);

  std::shared_ptr<protocol::ServerTransport> transport_;
  Options options_;
  SchedulerCore& core_;
  const Clock& clock_;
  Handler& handler_;
  std::map<std::string, WorkerConn> conns_;  // by peer id
  std::map<WorkerId, std::string> peerOf_;
};

}  // namespace kiln::scheduler
