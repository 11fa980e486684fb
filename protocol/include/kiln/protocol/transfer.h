#pragma once
/// NAR transfers in chunks with credit-based flow control, in both
/// directions over one connection (docs/protocol.md, "Transfers").
///
/// A `TransferEndpoint` is one side of a connection. It does no I/O itself:
/// it sends through a callback and is fed the messages that arrive, so the
/// scheduler and the worker plug it into their own socket loop, and tests
/// can drive it directly. Memory is bounded on both sides: a sender reads
/// the next chunk from its `Source` only when it holds credit, and a
/// receiver writes every chunk straight into its `TransferTarget`, granting
/// at most `window` chunks ahead.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "kiln/common/clock.h"
#include "kiln/common/stream.h"
#include "kiln/protocol/messages.h"

namespace kiln::protocol {

/// Where an incoming NAR goes (a temporary file or directory of a store).
/// Nothing it receives may be registered before commit() is called.
class TransferTarget : public Sink {
 public:
  /// Size and NAR hash matched: register the path. May throw Error; the
  /// transfer then fails with that message (and discard() is called).
  virtual void commit(const TransferHeader& header) = 0;
  /// The transfer failed or was aborted: remove what was written.
  virtual void discard(const std::string& reason) noexcept = 0;
};

/// Tuning of an endpoint. Both sides of a connection use the chunk size of
/// the scheduler's Welcome.
struct TransferOptions {
  uint32_t chunkSize = 256 << 10;  ///< bytes per Chunk, ≤ kMaxDataFrame
  uint32_t window = 8;             ///< credit granted per incoming transfer
  size_t maxActiveIncoming = 4;    ///< transfers receiving at once; others wait
  size_t maxQueuedIncoming = 100000;  ///< waiting transfers before refusing
  std::chrono::milliseconds idleTimeout{std::chrono::minutes(5)};
  /// Time for idle expiry; not owned. Null: RealClock::instance().
  const kiln::Clock* clock = nullptr;
};

/// How a transfer ended, as its sender or receiver sees it.
struct TransferOutcome {
  uint64_t transferId = 0;
  bool ok = false;
  std::string error;  ///< set iff !ok
};

/// One side of a connection's transfers. Not thread-safe: call it from the
/// thread that owns the connection. Callbacks run inside the calls that
/// trigger them and may start new transfers (e.g. a retry).
class TransferEndpoint {
 public:
  using Clock = std::chrono::steady_clock;
  /// Sends one message to the peer; may throw (the error then propagates
  /// out of the call that sent, and the connection should be treated as
  /// lost: call abortAll()). With Server/Client, a false from send() means
  /// the peer is gone or its queue is full; throw from the SendFn then.
  using SendFn = std::function<void(Message&&)>;
  /// Chooses the target of an incoming transfer (`upload`: UploadOutput,
  /// else PathData). Throw Error (reason sent to the sender) to refuse.
  using AcceptFn = std::function<std::unique_ptr<TransferTarget>(
      const TransferHeader&, bool upload)>;
  /// Reports the end of a transfer.
  using DoneFn = std::function<void(const TransferOutcome&)>;

  /// `onReceived` reports every incoming transfer's end (after commit).
  TransferEndpoint(SendFn send, AcceptFn accept, DoneFn onReceived,
                   TransferOptions options = {});
  ~TransferEndpoint();
  TransferEndpoint(const TransferEndpoint&) = delete;
  TransferEndpoint& operator=(const TransferEndpoint&) = delete;

  /// Starts sending the NAR `source` (exactly `header.info.narSize` bytes)
  /// as PathData, or UploadOutput when `upload`. A zero transferId is
  /// replaced by a fresh one; returns the id. `onSent` gets the receiver's
  /// verdict, or the local failure (source error, abort, idle timeout).
  uint64_t startSend(bool upload, TransferHeader header,
                     std::unique_ptr<Source> source, DoneFn onSent);

  /// Feeds one received message. Returns false if it is not a transfer
  /// message (PathData, UploadOutput, Credit, Chunk, TransferAbort, or an
  /// Ack of PathData/UploadOutput). Protocol violations by the peer fail
  /// the transfer concerned; they are not thrown.
  bool handle(const Message& msg);

  /// Fails every transfer that saw no progress for `idleTimeout` (a sent
  /// transfer the receiver has not accepted yet waits in its queue and does
  /// not expire; a dead peer is the connection's heartbeat's business).
  void expireIdle(Clock::time_point now);
  /// expireIdle at the options' clock's now.
  void expireIdle();
  /// Fails every transfer (connection lost or closing).
  void abortAll(const std::string& reason);

  size_t outgoingCount() const { return outgoing_.size(); }
  size_t incomingCount() const { return incoming_.size() + queued_.size(); }

 private:
  struct Outgoing;
  struct Incoming;

  void onCredit(const Credit& c);
  void onAck(const Ack& a);
  void onHeader(const TransferHeader& h, bool upload);
  void onChunk(const Chunk& c);
  void onAbort(const TransferAbort& a);
  void pump(Outgoing& out);
  void finishOutgoing(uint64_t id, bool ok, const std::string& error);
  void activateQueued();
  void finishIncoming(uint64_t id, bool ok, const std::string& error,
                      bool tellSender);
  const kiln::Clock& clock() const {
    return options_.clock ? *options_.clock : RealClock::instance();
  }

  SendFn send_;
  AcceptFn accept_;
  DoneFn onReceived_;
  TransferOptions options_;
  uint64_t nextId_ = 1;
  std::map<uint64_t, std::unique_ptr<Outgoing>> outgoing_;
  std::map<uint64_t, std::unique_ptr<Incoming>> incoming_;
  std::deque<std::pair<TransferHeader, bool>> queued_;
};

}  // namespace kiln::protocol
