// The HTTP server: listening, accepting within the connection limit, the
// I/O and handler threads (server.h; connections in session.cc).
#include "kiln/web/server.h"

// clang-format off
#include <utility>  // before Boost.Asio: awaitable.hpp uses std::exchange
// clang-format on

#include <boost/asio.hpp>
#include <charconv>
#include <thread>

#include "kiln/common/logging.h"
#include "session.h"

namespace kiln::web {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

}  // namespace

std::pair<std::string, int> parseListenAddress(const std::string& address,
                                               const std::string& what) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos)
    throw Error(what + " '" + address + "' must be HOST:PORT");
  std::string host = address.substr(0, colon);
  std::string portText = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty() || host == "localhost") host = "127.0.0.1";
  int port = -1;
  auto [end, ec] =
      std::from_chars(portText.data(), portText.data() + portText.size(), port);
  if (ec != std::errc() || end != portText.data() + portText.size() ||
      port < 0 || port > 65535)
    throw Error(what + " '" + address + "': the port must be 0..65535");
  boost::system::error_code bad;
  net::ip::make_address(host, bad);
  if (bad)
    throw Error(what + " '" + address + "': '" + host +
                "' is not an IP address");
  return {host, port};
}

struct WebServer::Impl {
  Impl(WebServerConfig cfg, const Router& router, RequestObserver observer)
      : handlers(std::max(1u, cfg.handlerThreads)),
        state{std::move(cfg), router, std::move(observer), handlers},
        acceptor(ioc),
        retry(ioc) {}

  void listen();
  void accept();
  void onAccept(boost::system::error_code ec, tcp::socket socket);
  void refuseBusy(tcp::socket socket, const std::string& client);

  net::thread_pool handlers;
  ServerState state;
  net::io_context ioc;
  tcp::acceptor acceptor;
  net::steady_timer retry;
  std::vector<std::thread> threads;
};

void WebServer::Impl::listen() {
  auto [host, port] = parseListenAddress(state.config.listen, "web address");
  tcp::endpoint ep(net::ip::make_address(host), static_cast<uint16_t>(port));
  boost::system::error_code ec;
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    throw Error("web: cannot listen on " + state.config.listen + ": " +
                ec.message());
}

void WebServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc),
                        [this](boost::system::error_code ec, tcp::socket s) {
                          onAccept(ec, std::move(s));
                        });
}

void WebServer::Impl::onAccept(boost::system::error_code ec,
                               tcp::socket socket) {
  if (ec == net::error::operation_aborted) return;
  if (ec) {  // e.g. out of file descriptors: retry a little later
    logWarn("web: accept failed: " + ec.message());
    retry.expires_after(std::chrono::milliseconds(100));
    retry.async_wait([this](boost::system::error_code e) {
      if (!e) accept();
    });
    return;
  }
  boost::system::error_code bad;
  auto peer = socket.remote_endpoint(bad);
  std::string client = bad ? "" : peer.address().to_string();
  ClientSlot slot(state.connections, client);
  if (!slot.taken())
    refuseBusy(std::move(socket), client);
  else
    std::make_shared<Session>(state, std::move(socket), std::move(slot))
        ->start();
  accept();
}

// Answers 503 to a connection beyond the limit and closes it (bounded by
// a short write timeout; the socket's send buffer normally takes it).
void WebServer::Impl::refuseBusy(tcp::socket socket,
                                 const std::string& client) {
  auto stream = std::make_shared<boost::beast::tcp_stream>(std::move(socket));
  bool mine = state.connections.of(client) >= state.config.maxConnectionsPerClient;
  Response r = Response::error(
      503,
      mine ? "too many connections from " + client + " (" +
                 std::to_string(state.config.maxConnectionsPerClient) +
                 " per client); close some or try again later"
           : "too many connections (" +
                 std::to_string(state.config.maxConnections) +
                 "); try again later",
      false);
  r.headers.emplace_back("Retry-After", "1");
  auto text = std::make_shared<std::string>(
      headerText(r, r.body.size(), false, false, true) + r.body);
  stream->expires_after(std::chrono::seconds(2));
  net::async_write(*stream, net::buffer(*text),
                   [stream, text](boost::system::error_code, size_t) {
                     boost::system::error_code e;
                     stream->socket().shutdown(tcp::socket::shutdown_send, e);
                   });
}

WebServer::WebServer(WebServerConfig config, const Router& router,
                     RequestObserver observer)
    : impl_(std::make_unique<Impl>(std::move(config), router,
                                   std::move(observer))) {
  impl_->listen();
  impl_->accept();
  unsigned n = std::max(1u, impl_->state.config.ioThreads);
  for (unsigned i = 0; i < n; i++)
    impl_->threads.emplace_back([this] {
      lowerThreadPriority(impl_->state.config.threadNice);
      try {
        impl_->ioc.run();
      } catch (const std::exception& e) {
        logError(std::string("web: I/O thread stopped: ") + e.what());
      }
    });
}

WebServer::~WebServer() {
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->handlers.join();
}

int WebServer::port() const {
  boost::system::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? -1 : ep.port();
}

std::string WebServer::url() const {
  boost::system::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  if (ec) return "";
  auto addr = ep.address();
  if (addr.is_unspecified())
    addr = addr.is_v6() ? net::ip::address(net::ip::address_v6::loopback())
                        : net::ip::address(net::ip::address_v4::loopback());
  std::string host =
      addr.is_v6() ? "[" + addr.to_string() + "]" : addr.to_string();
  return "http://" + host + ":" + std::to_string(ep.port());
}

size_t WebServer::connections() const {
  return impl_->state.connections.total();
}

size_t WebServer::streams() const { return impl_->state.streams.total(); }

}  // namespace kiln::web
