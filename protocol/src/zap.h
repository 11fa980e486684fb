#pragma once
// The ZAP handler (ZeroMQ RFC 27) of a server's context: admits a CURVE
// client only if its public key is on the allow-list.

#include <atomic>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "kiln/protocol/keys.h"

namespace kiln::protocol {

/// Answers authentication requests on inproc://zeromq.zap.01 of `ctx` from
/// its own thread until destroyed. The handler is bound when the
/// constructor returns, so sockets bound afterwards are protected.
class ZapHandler {
 public:
  ZapHandler(zmq::context_t& ctx, AllowList allowed);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  /// Requests refused so far.
  uint64_t refused() const { return refused_; }

 private:
  void run() noexcept;
  void answer() noexcept;

  AllowList allowed_;
  zmq::socket_t zap_;
  zmq::socket_t stopRx_, stopTx_;
  std::atomic<uint64_t> refused_{0};
  std::thread thread_;
};

}  // namespace kiln::protocol
