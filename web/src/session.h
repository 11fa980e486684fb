#pragma once
// One HTTP connection of the server (server.h): reads requests under the
// configured bounds, runs handlers on the handler pool, writes responses
// (plain, file ranges, chunked streams), keeps the connection alive or
// closes it. All its I/O runs on its own strand; at most one request per
// connection is in flight.

// clang-format off
#include <utility>  // before Boost.Asio: awaitable.hpp uses std::exchange
// clang-format on

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client_limits.h"
#include "kiln/web/server.h"
#include "response_body.h"

namespace kiln::web {

/// What every session of a server shares.
struct ServerState {
  ServerState(WebServerConfig c, const Router& r, RequestObserver o,
              boost::asio::thread_pool& h)
      : config(std::move(c)),
        router(r),
        observer(std::move(o)),
        handlers(h),
        connections(config.maxConnections, config.maxConnectionsPerClient),
        streams(config.maxStreams, config.maxStreamsPerClient) {}
  WebServerConfig config;
  const Router& router;
  RequestObserver observer;
  boost::asio::thread_pool& handlers;
  ClientCounter connections;  ///< open connections by client address
  ClientCounter streams;      ///< streamed answers by client address
};

/// The target of a request ("/path?query") split and decoded into `req`;
/// an error message when it is not a valid origin-form target.
std::optional<std::string> parseTarget(std::string_view target, Request& req);

/// Lowers the calling thread's priority by `nice` levels (capped at 19),
/// once per thread; a failure (no permission) is ignored.
void lowerThreadPriority(int nice);

/// A connection. Create with make_shared on a socket bound to a strand,
/// with the connection slot its client took (given back once the session
/// starts closing).
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(ServerState& state, boost::asio::ip::tcp::socket&& socket,
          ClientSlot slot);
  /// Starts reading the first request.
  void start();

 private:
  using ErrorCode = boost::beast::error_code;
  void waitRequest();
  void readRequest();
  void onRead(ErrorCode ec);
  void reject(int status, const std::string& message);
  void runHandler(const Request& req);  // on a handler thread
  void send();
  void afterHeaderOk();
  void sendFileChunk();
  void pollStream();
  void onStreamPiece(BodyStream::Next next, bool failed);
  void endStream(std::string last);
  void finish();
  void closeGracefully();
  void drain();
  template <typename Buffers, typename Next>
  void write(const Buffers& buffers, Next next);

  ServerState& state_;
  boost::beast::tcp_stream stream_;
  boost::asio::steady_timer timer_;
  boost::beast::flat_buffer buffer_;
  std::optional<
      boost::beast::http::request_parser<boost::beast::http::string_body>>
      parser_;
  std::string remote_;  // "ip:port"
  std::string client_;  // "ip": what the limits per client count
  ClientSlot connSlot_;
  ClientSlot streamSlot_;  // while a streamed answer is sent
  std::chrono::steady_clock::time_point streamActive_;  // its last data
  // The response being written (set by the handler thread before it posts
  // back to the strand).
  Response resp_;
  std::optional<FileBody> file_;
  bool keepAlive_ = false;
  bool http11_ = true;
  bool head_ = false;
  bool timedOut_ = false;  // the request timeout fired during readRequest
  bool reading_ = false;   // a request is being read
  uint64_t readGen_ = 0;   // which read the request timer belongs to
  std::string out_;
  std::vector<char> chunk_;
};

}  // namespace kiln::web
