#include <algorithm>
#include <optional>

#include "kiln/common/logging.h"
#include "kiln/protocol/transport.h"
#include "socket_util.h"
#include "zap.h"

namespace kiln::protocol {

struct Server::Impl {
  zmq::context_t context;
  std::optional<ZapHandler> zap;  // destroyed before the context
  zmq::socket_t socket{context, zmq::socket_type::router};
  std::string endpoint;
};

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>()) {
  auto& s = impl_->socket;
  try {
    detail::setCommonOptions(s, options.zmqHeartbeat,
                             std::chrono::milliseconds(1000));
    s.set(zmq::sockopt::router_mandatory, 1);
    s.set(
        zmq::sockopt::maxmsgsize,
        static_cast<int64_t>(std::min(options.maxMessageBytes, kMaxBodyFrame)));
    if (!options.insecurePlaintext) {
      checkZ85Key(options.keys.secretKey, "scheduler secret key");
      if (options.allowed.size() == 0)
        logWarn("the allow-list of worker keys is empty: no worker can join");
      impl_->zap.emplace(impl_->context, std::move(options.allowed));
      s.set(zmq::sockopt::curve_server, 1);
      detail::setKey(s, ZMQ_CURVE_SECRETKEY, options.keys.secretKey);
      s.set(zmq::sockopt::zap_domain, "kiln");
    }
    s.bind(options.bind);
    impl_->endpoint = s.get(zmq::sockopt::last_endpoint);
    // A Unix socket is guarded by its folder's permissions; a network
    // endpoint in plain text is not guarded at all.
    if (options.insecurePlaintext && options.bind.rfind("ipc://", 0) != 0)
      logWarn("the scheduler listens in plain text on " + impl_->endpoint +
              ": any client that reaches it may join (development only)");
  } catch (const zmq::error_t& e) {
    throw TransportError("listening on '" + options.bind + "': " + e.what());
  }
}

Server::~Server() = default;

std::string Server::endpoint() const { return impl_->endpoint; }

uint64_t Server::refusedConnections() const {
  return impl_->zap ? impl_->zap->refused() : 0;
}

zmq::socket_t& Server::socket() { return impl_->socket; }

std::optional<Received> Server::receive(std::chrono::milliseconds timeout,
                                        int wakeFd) {
  auto deadline = detail::socketClock().now() + timeout;
  std::vector<zmq::pollitem_t> items = {
      {impl_->socket.handle(), 0, ZMQ_POLLIN, 0}};
  if (wakeFd >= 0) items.push_back({nullptr, wakeFd, ZMQ_POLLIN, 0});
  for (;;) {
    auto parts = detail::tryReceive(impl_->socket);
    if (!parts) {
      if (!detail::waitUntil(items, deadline)) return std::nullopt;
      if (wakeFd >= 0 && (items[1].revents & ZMQ_POLLIN)) return std::nullopt;
      continue;
    }
    if (parts->size() < 2) {
      ++dropped_;
      continue;
    }
    Received r;
    r.peer = (*parts)[0].to_string();
    if (impl_->zap) {
      try {
        r.user = (*parts)[1].gets("User-Id");
      } catch (const zmq::error_t&) {
      }
    }
    try {
      r.msg = decode(detail::toFrames(*parts, 1));
      return r;
    } catch (const VersionMismatch& e) {
      ++dropped_;
      auto reason = versionMismatchText(kProtocolVersion, e.theirVersion());
      logWarn("refused worker '" + r.user + "': " + reason);
      detail::sendFrames(impl_->socket, &r.peer,
                         encode(Refused{kProtocolVersion, reason}));
    } catch (const FormatError& e) {
      ++dropped_;
      logWarn("dropped a malformed message from worker '" + r.user +
              "': " + e.what());
    }
  }
}

bool Server::send(const std::string& peer, const Message& msg) {
  return detail::sendFrames(impl_->socket, &peer, encode(msg));
}

}  // namespace kiln::protocol
