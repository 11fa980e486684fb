#include <cstring>

#include "kiln/common/logging.h"
#include "kiln/protocol/transport.h"
#include "socket_util.h"

namespace kiln::protocol {

struct Client::Impl {
  zmq::context_t context;
  zmq::socket_t socket{context, zmq::socket_type::dealer};
  zmq::socket_t monitor{context, zmq::socket_type::pair};
  std::string endpoint;
  bool connected = false;
  bool plaintext = false;
  std::string handshakeError;

  void drainMonitor();
  void onEvent(uint16_t event, uint32_t value);
};

Client::Client(ClientOptions options) : impl_(std::make_unique<Impl>()) {
  auto& s = impl_->socket;
  impl_->endpoint = options.connect;
  impl_->plaintext = options.insecurePlaintext;
  try {
    detail::setCommonOptions(s, options.zmqHeartbeat, options.linger);
    s.set(zmq::sockopt::reconnect_ivl,
          static_cast<int>(options.reconnectMin.count()));
    s.set(zmq::sockopt::reconnect_ivl_max,
          static_cast<int>(options.reconnectMax.count()));
    if (!options.insecurePlaintext) {
      checkZ85Key(options.serverPublicKey, "scheduler public key");
      detail::setKey(s, ZMQ_CURVE_SERVERKEY, options.serverPublicKey);
      detail::setKey(s, ZMQ_CURVE_PUBLICKEY, options.keys.publicKey);
      detail::setKey(s, ZMQ_CURVE_SECRETKEY, options.keys.secretKey);
    }
    auto monitorEndpoint = "inproc://kiln-monitor-" +
                           std::to_string(reinterpret_cast<uintptr_t>(this));
    int events = ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                 ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                 ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                 ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_DISCONNECTED;
    if (zmq_socket_monitor(s.handle(), monitorEndpoint.c_str(), events) != 0)
      throw zmq::error_t();
    impl_->monitor.set(zmq::sockopt::linger, 0);
    impl_->monitor.connect(monitorEndpoint);
    s.connect(options.connect);
  } catch (const zmq::error_t& e) {
    throw TransportError("connecting to '" + options.connect +
                         "': " + e.what());
  }
}

Client::~Client() {
  // Stop the monitor before its socket closes.
  zmq_socket_monitor(impl_->socket.handle(), nullptr, 0);
}

void Client::Impl::onEvent(uint16_t event, uint32_t value) {
  switch (event) {
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
      connected = true;
      handshakeError.clear();
      break;
    case ZMQ_EVENT_DISCONNECTED:
      connected = false;
      break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
      handshakeError =
          "the scheduler at " + endpoint +
          " refused this worker's key (ZAP status " + std::to_string(value) +
          "): add the worker's public key to the scheduler's allow-list";
      break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
      handshakeError =
          "the handshake with " + endpoint + " failed (ZMTP error " +
          std::to_string(value) +
          "): do both sides agree on CURVE (or on --insecure-plaintext)?";
      break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
      handshakeError =
          "the handshake with " + endpoint + " failed: " +
          (plaintext ? "this worker speaks plain text; does the scheduler "
                       "require CURVE (no --insecure-plaintext there)?"
                     : "is the scheduler's public key the right one, and does "
                       "the scheduler use CURVE too?");
      break;
    default:
      return;
  }
  if (!handshakeError.empty() && event != ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
    logDebug(handshakeError);
}

void Client::Impl::drainMonitor() {
  while (auto parts = detail::tryReceive(monitor)) {
    if (parts->empty() || (*parts)[0].size() < 6) continue;
    uint16_t event;
    uint32_t value;
    std::memcpy(&event, (*parts)[0].data(), 2);
    std::memcpy(&value, static_cast<const char*>((*parts)[0].data()) + 2, 4);
    onEvent(event, value);
  }
}

bool Client::connected() {
  impl_->drainMonitor();
  return impl_->connected;
}

std::string Client::handshakeError() {
  impl_->drainMonitor();
  return impl_->handshakeError;
}

void Client::dropUnsent() { impl_->socket.set(zmq::sockopt::linger, 0); }

zmq::socket_t& Client::socket() { return impl_->socket; }

std::optional<Message> Client::receive(std::chrono::milliseconds timeout,
                                       int wakeFd) {
  auto deadline = detail::socketClock().now() + timeout;
  std::vector<zmq::pollitem_t> items = {
      {impl_->socket.handle(), 0, ZMQ_POLLIN, 0},
      {impl_->monitor.handle(), 0, ZMQ_POLLIN, 0}};
  if (wakeFd >= 0) items.push_back({nullptr, wakeFd, ZMQ_POLLIN, 0});
  for (;;) {
    impl_->drainMonitor();
    auto parts = detail::tryReceive(impl_->socket);
    if (!parts) {
      if (!detail::waitUntil(items, deadline)) return std::nullopt;
      if (wakeFd >= 0 && (items[2].revents & ZMQ_POLLIN)) return std::nullopt;
      continue;
    }
    try {
      return decode(detail::toFrames(*parts, 0));
    } catch (const FormatError& e) {
      logWarn(std::string("dropped a message from the scheduler: ") + e.what());
    }
  }
}

bool Client::send(const Message& msg) { return sendRaw(encode(msg)); }

bool Client::sendRaw(const Frames& frames) {
  return detail::sendFrames(impl_->socket, nullptr, frames);
}

}  // namespace kiln::protocol
