#pragma once
/// The HTTP server (Boost.Beast): asynchronous I/O on a few threads, no
/// thread per connection, handlers on a small pool of their own so a slow
/// page never stalls reading or writing other connections. Every input is
/// bounded: header and body sizes (431/413), concurrent connections in all
/// and per client address (503 beyond), long-lived streams (live logs) in
/// all and per client address (429 beyond, so streams never take the
/// connections the pages, the API and the cache need), an idle stream's
/// lifetime, and the time to send a request or take a response (a
/// slow-loris client gets a 408 and is cut off without holding up others).
/// Only requests for a known host are answered (421 otherwise), so that a
/// web page cannot reach the server through DNS rebinding.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/web/http.h"
#include "kiln/web/router.h"

namespace kiln::web {

/// Limits and threads of a server.
struct WebServerConfig {
  std::string listen = "127.0.0.1:8470";  ///< "HOST:PORT" (port 0: any)
  size_t maxHeaderBytes = 16 << 10;       ///< request line + headers
  size_t maxBodyBytes = 1 << 20;
  size_t maxConnections = 256;
  /// Connections one client address may hold (a reverse proxy in front
  /// counts as one client).
  size_t maxConnectionsPerClient = 128;
  /// Streamed answers (live logs) open at once, in all and per client
  /// address; beyond, a stream request is answered 429 and closed.
  size_t maxStreams = 64;
  size_t maxStreamsPerClient = 8;
  /// A stream that had nothing to send for this long ends (a browser's
  /// EventSource reconnects and resumes where it was).
  std::chrono::milliseconds streamIdleLifetime{300000};
  /// Host names the server answers for besides IP addresses and
  /// `localhost` (and names below it), which are always answered; "*"
  /// answers any. A request naming another host gets 421.
  std::vector<std::string> hosts;
  /// Time a client has to send the rest of a request once its first byte
  /// arrived (headers and body); then it is answered 408 and closed.
  std::chrono::milliseconds requestTimeout{10000};
  /// A connection with no request started is closed after this.
  std::chrono::milliseconds idleTimeout{30000};
  /// Time each write (a response, or one piece of a long body) may take.
  std::chrono::milliseconds writeTimeout{30000};
  /// Pause before asking a BodyStream again after it said kWait.
  std::chrono::milliseconds streamPoll{200};
  unsigned ioThreads = 1;
  unsigned handlerThreads = 4;
  /// How many nice levels below the process the server's threads run, so
  /// that a busy web never takes the CPU from the scheduler's loop in the
  /// same process (0: same priority). Failure to lower it is ignored.
  int threadNice = 10;
};

/// Observes each answered request (for metrics); called on a handler
/// thread with the matched route pattern ("" for none), the method, the
/// status and the handler's wall time. Must not throw.
using RequestObserver =
    std::function<void(const std::string& route, const std::string& method,
                       int status, double seconds)>;

/// A running server. Construction binds and starts the threads; the
/// destructor stops accepting, closes connections and joins the threads.
class WebServer {
 public:
  /// Binds `config.listen` and serves `router` (borrowed: it must outlive
  /// the server and not change). Throws Error if the address is malformed
  /// or cannot be bound.
  WebServer(WebServerConfig config, const Router& router,
            RequestObserver observer = nullptr);
  ~WebServer();
  WebServer(const WebServer&) = delete;
  WebServer& operator=(const WebServer&) = delete;

  /// The bound port (the real one when config.listen asked for 0).
  int port() const;
  /// "http://HOST:PORT" of the bound address.
  std::string url() const;
  /// Connections open now (not counting those closing).
  size_t connections() const;
  /// Streamed answers open now.
  size_t streams() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Whether a request whose `Host` header is `host` (a name or address,
/// with or without a port; "" when absent) is for this server: an IP
/// address, `localhost` or a name below it, a name in `hosts` (any case),
/// anything when `hosts` holds "*", and no Host at all (HTTP/1.0).
bool hostAllowed(const std::string& host, const std::vector<std::string>& hosts);

/// Splits "HOST:PORT" (or "[v6]:PORT", or ":PORT" for 127.0.0.1); throws
/// Error naming `what` when malformed.
std::pair<std::string, int> parseListenAddress(const std::string& address,
                                               const std::string& what);

}  // namespace kiln::web
