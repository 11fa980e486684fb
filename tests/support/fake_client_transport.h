#pragma once
// A fake of the worker's transport (protocol::ClientTransport): the worker
// daemon without sockets. A test plays the schedulers: FakeNetwork hands
// DaemonConfig::connector a FakeClientTransport per connection, each
// reaching the FakeSchedulerLink of its endpoint; the test reads what the
// worker sent with take() and answers with send(). Every message is encoded
// and decoded on the way, so the wire's validation applies, and a message
// of another protocol version is answered with Refused as
// protocol::Server answers it.
//
// Nothing here reads or moves a clock: time is the test's FakeClock. A
// transport's receive() returns a queued message at once; otherwise it
// waits only for the daemon's own wake-up (`wakeFd`: a slot's event, stop())
// for at most its timeout, so that a test driving Daemon::turn() sees a
// slot thread's result on the next turn.

#include <poll.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/protocol/transport.h"

namespace kiln::testing {

/// One scheduler as the worker's fake transports reach it. Thread-safe.
class FakeSchedulerLink {
 public:
  /// Whether the handshake of the worker's transports succeeds (a
  /// scheduler that does not accept connections: false).
  void setConnected(bool connected) {
    std::lock_guard lock(mutex_);
    connected_ = connected;
  }
  /// The handshake error the worker's transports report ("" for none).
  void refuseHandshake(std::string why) {
    std::lock_guard lock(mutex_);
    handshakeError_ = std::move(why);
  }
  /// A message to the worker. Throws FormatError for an invalid one.
  void send(const protocol::Message& msg) {
    auto frames = protocol::encode(msg);
    std::lock_guard lock(mutex_);
    toWorker_.push_back(std::move(frames));
  }
  /// What the worker sent since the last call, oldest first. Malformed
  /// messages are dropped; another protocol version is answered Refused.
  std::vector<protocol::Message> take() {
    std::deque<protocol::Frames> got;
    {
      std::lock_guard lock(mutex_);
      got.swap(fromWorker_);
    }
    std::vector<protocol::Message> out;
    for (auto& frames : got) {
      try {
        out.push_back(protocol::decode(frames));
      } catch (const protocol::VersionMismatch& e) {
        send(protocol::Refused{
            protocol::kProtocolVersion,
            protocol::versionMismatchText(protocol::kProtocolVersion,
                                          e.theirVersion())});
      } catch (const FormatError&) {
        ++dropped_;
      }
    }
    return out;
  }
  /// Transports opened to this scheduler so far.
  int connects() const {
    std::lock_guard lock(mutex_);
    return connects_;
  }
  /// Malformed messages take() dropped.
  int dropped() const { return dropped_; }

 private:
  friend class FakeClientTransport;
  friend class FakeNetwork;

  mutable std::mutex mutex_;
  bool connected_ = true;
  std::string handshakeError_;
  std::deque<protocol::Frames> toWorker_, fromWorker_;
  int connects_ = 0;
  int dropped_ = 0;
};

/// The worker's end of a FakeSchedulerLink.
class FakeClientTransport final : public protocol::ClientTransport {
 public:
  explicit FakeClientTransport(std::shared_ptr<FakeSchedulerLink> link)
      : link_(std::move(link)) {}

  std::optional<protocol::Message> receive(std::chrono::milliseconds timeout,
                                           int wakeFd = -1) override {
    for (int round = 0; round < 2; ++round) {
      protocol::Frames frames;
      {
        std::lock_guard lock(link_->mutex_);
        if (!link_->toWorker_.empty()) {
          frames = std::move(link_->toWorker_.front());
          link_->toWorker_.pop_front();
        }
      }
      if (!frames.empty()) return protocol::decode(frames);
      if (round == 1 || wakeFd < 0) return std::nullopt;
      pollfd p{wakeFd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(timeout.count())) > 0)
        return std::nullopt;
    }
    return std::nullopt;
  }
  bool send(const protocol::Message& msg) override {
    return sendRaw(protocol::encode(msg));
  }
  bool sendRaw(const protocol::Frames& frames) override {
    std::lock_guard lock(link_->mutex_);
    link_->fromWorker_.push_back(frames);
    return true;
  }
  bool connected() override {
    std::lock_guard lock(link_->mutex_);
    return link_->connected_ && link_->handshakeError_.empty();
  }
  std::string handshakeError() override {
    std::lock_guard lock(link_->mutex_);
    return link_->handshakeError_;
  }
  void dropUnsent() override {}

 private:
  std::shared_ptr<FakeSchedulerLink> link_;
};

/// The schedulers a worker may reach, by endpoint.
class FakeNetwork {
 public:
  /// The scheduler at `endpoint` (made on first use).
  std::shared_ptr<FakeSchedulerLink> scheduler(const std::string& endpoint) {
    std::lock_guard lock(mutex_);
    auto& link = links_[endpoint];
    if (!link) link = std::make_shared<FakeSchedulerLink>();
    return link;
  }
  /// For DaemonConfig::connector: a new transport to the endpoint's
  /// scheduler; what it had queued for an earlier connection is dropped.
  protocol::ClientConnector connector() {
    return [this](const protocol::ClientOptions& o) {
      auto link = scheduler(o.connect);
      {
        std::lock_guard lock(link->mutex_);
        ++link->connects_;
        link->toWorker_.clear();
      }
      return std::make_unique<FakeClientTransport>(link);
    };
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<FakeSchedulerLink>> links_;
};

}  // namespace kiln::testing
