#pragma once
/// An in-memory `ServerTransport`: the scheduler service without sockets.
/// A test plays the workers: `deliver` puts a worker's message in the
/// service's inbox, `take` reads what the service sent to a worker. Every
/// message is encoded and decoded on the way, so the same validation as on
/// the wire applies. `receive` never waits: a test drives the service turn
/// by turn (with a FakeClock), so nothing depends on timing. Thread-safe.

#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kiln/protocol/transport.h"

namespace kiln::protocol {

/// Messages between a scheduler service and simulated workers, in memory.
class MemoryTransport final : public ServerTransport {
 public:
  /// "memory://".
  std::string endpoint() const override;
  /// The oldest delivered message, or nullopt at once when there is none
  /// (`timeout` and `wakeFd` are ignored: nothing ever blocks).
  std::optional<Received> receive(std::chrono::milliseconds timeout,
                                  int wakeFd = -1) override;
  /// Queues `msg` for `peer`; false while `peer` is disconnected. Throws
  /// FormatError for an invalid message (as the encoder does).
  bool send(const std::string& peer, const Message& msg) override;

  /// A worker's message from `peer` (`user`: the allow-list name of its
  /// key) arrives. Throws FormatError for an invalid message.
  void deliver(const std::string& peer, const Message& msg,
               const std::string& user = "");
  /// What was sent to `peer` since the last call, oldest first.
  std::vector<Message> take(const std::string& peer);
  /// Makes send() to `peer` fail (a vanished worker), or work again.
  void setConnected(const std::string& peer, bool connected);
  /// Messages waiting in the service's inbox.
  size_t pending() const;

 private:
  mutable std::mutex mutex_;
  std::deque<Received> inbox_;
  std::map<std::string, std::vector<Message>> outbox_;
  std::set<std::string> disconnected_;
};

}  // namespace kiln::protocol
