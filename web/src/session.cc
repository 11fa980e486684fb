// One connection of the HTTP server (session.h).
#include "session.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>

#include "kiln/common/logging.h"

namespace kiln::web {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

constexpr size_t kFirstRead = 4096;
constexpr size_t kChunkBytes = 64 << 10;
constexpr std::chrono::seconds kLingerTimeout{2};

bool isHttpError(const beast::error_code& ec) {
  return &ec.category() ==
         &http::make_error_code(http::error::bad_method).category();
}

std::string toHex(size_t n) {
  char buf[32];
  int len = snprintf(buf, sizeof buf, "%zx", n);
  return std::string(buf, static_cast<size_t>(len));
}

}  // namespace

bool hostAllowed(const std::string& host,
                 const std::vector<std::string>& hosts) {
  if (host.empty()) return true;
  std::string name = host;
  if (name.front() == '[') {  // "[v6]" or "[v6]:port"
    auto close = name.find(']');
    if (close == std::string::npos) return false;
    name = name.substr(1, close - 1);
  } else if (auto colon = name.rfind(':'); colon != std::string::npos) {
    name.resize(colon);
  }
  for (char& c : name) c = static_cast<char>(std::tolower((unsigned char)c));
  if (!name.empty() && name.back() == '.') name.pop_back();
  boost::system::error_code ec;
  net::ip::make_address(name, ec);
  if (!ec) return true;
  if (name == "localhost" || name.ends_with(".localhost")) return true;
  for (auto& h : hosts) {
    if (h == "*") return true;
    std::string want = h;
    for (char& c : want) c = static_cast<char>(std::tolower((unsigned char)c));
    if (want == name) return true;
  }
  return false;
}

void lowerThreadPriority(int nice) {
  thread_local bool lowered = false;
  if (lowered || nice <= 0) return;
  lowered = true;
  auto tid = static_cast<id_t>(gettid());
  errno = 0;
  int now = getpriority(PRIO_PROCESS, tid);
  if (errno != 0) return;
  (void)setpriority(PRIO_PROCESS, tid, std::min(19, now + nice));
}

std::optional<std::string> parseTarget(std::string_view target, Request& req) {
  if (target.empty() || target[0] != '/')
    return "the request target must be a path starting with '/'";
  req.target = std::string(target);
  auto q = target.find('?');
  std::string_view path = target.substr(0, q);
  if (!percentDecode(path, false))
    return "the path has a malformed %-escape or a NUL byte";
  req.path = std::string(path);
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    auto amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? "" : rest.substr(amp + 1);
    if (pair.empty()) continue;
    auto eq = pair.find('=');
    auto name = percentDecode(pair.substr(0, eq), true);
    auto value = percentDecode(
        eq == std::string_view::npos ? "" : pair.substr(eq + 1), true);
    if (!name || !value)
      return "the query has a malformed %-escape or a NUL byte";
    req.query[*name] = std::move(*value);
  }
  return std::nullopt;
}

Session::Session(ServerState& state, net::ip::tcp::socket&& socket,
                 ClientSlot slot)
    : state_(state),
      stream_(std::move(socket)),
      timer_(stream_.get_executor()),
      connSlot_(std::move(slot)) {
  beast::error_code ec;
  auto ep = stream_.socket().remote_endpoint(ec);
  if (!ec) {
    client_ = ep.address().to_string();
    remote_ = client_ + ":" + std::to_string(ep.port());
  }
}

void Session::start() {
  net::dispatch(stream_.get_executor(),
                [self = shared_from_this()] { self->waitRequest(); });
}

template <typename Buffers, typename Next>
void Session::write(const Buffers& buffers, Next next) {
  stream_.expires_after(state_.config.writeTimeout);
  net::async_write(stream_, buffers,
                   [self = shared_from_this(), next](ErrorCode ec, size_t) {
                     if (ec) return;  // the connection ends with self
                     (self.get()->*next)();
                   });
}

// Waits (at most the idle timeout) for a request's first bytes, then
// gives the client the request timeout to send the rest.
void Session::waitRequest() {
  parser_.emplace();
  parser_->header_limit(
      static_cast<std::uint32_t>(state_.config.maxHeaderBytes));
  parser_->body_limit(state_.config.maxBodyBytes);
  if (buffer_.size() > 0) return readRequest();  // pipelined
  stream_.expires_after(state_.config.idleTimeout);
  stream_.async_read_some(
      buffer_.prepare(kFirstRead),
      [self = shared_from_this()](ErrorCode ec, size_t n) {
        if (ec) return;  // idle, closed or reset: the session ends
        self->buffer_.commit(n);
        self->readRequest();
      });
}

// The request timeout runs on timer_, not on the stream, so that a client
// too slow to send its request (a slow-loris) still gets a 408 naming the
// limit before the connection closes.
void Session::readRequest() {
  stream_.expires_never();
  timedOut_ = false;
  reading_ = true;
  timer_.expires_after(state_.config.requestTimeout);
  timer_.async_wait([self = shared_from_this(), gen = ++readGen_](ErrorCode ec) {
    // Cancelled, or the read ended before this handler ran.
    if (ec || !self->reading_ || gen != self->readGen_) return;
    self->timedOut_ = true;
    ErrorCode ignored;
    self->stream_.socket().cancel(ignored);
  });
  http::async_read(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](ErrorCode ec, size_t) { self->onRead(ec); });
}

void Session::onRead(ErrorCode ec) {
  reading_ = false;
  timer_.cancel();
  if (timedOut_)
    return reject(408, "the request was not complete within " +
                           std::to_string(state_.config.requestTimeout.count()) +
                           " ms");
  if (ec == http::error::body_limit)
    return reject(413, "the request body is larger than " +
                           std::to_string(state_.config.maxBodyBytes) +
                           " bytes");
  if (ec == http::error::header_limit)
    return reject(431, "the request line and headers are larger than " +
                           std::to_string(state_.config.maxHeaderBytes) +
                           " bytes");
  if (ec && isHttpError(ec) && ec != http::error::end_of_stream &&
      ec != http::error::partial_message)
    return reject(400, "malformed request: " + ec.message());
  if (ec) return;  // timeout (the stream is closed), reset, end of stream
  auto& msg = parser_->get();
  std::string host(msg[http::field::host]);
  if (!hostAllowed(host, state_.config.hosts))
    return reject(421, "this server does not answer for host '" + host +
                           "'; it answers IP addresses, localhost and the "
                           "host names it is configured with (kiln "
                           "scheduler --web-host NAME, serve's web_hosts)");
  Request req;
  auto target = msg.target();
  if (auto err = parseTarget({target.data(), target.size()}, req))
    return reject(400, *err);
  req.method = std::string(msg.method_string());
  for (auto& f : msg) {
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower((unsigned char)c));
    auto [it, fresh] = req.headers.emplace(name, std::string(f.value()));
    if (!fresh) it->second += ", " + std::string(f.value());
  }
  req.body = std::move(msg.body());
  req.remoteAddress = remote_;
  keepAlive_ = msg.keep_alive();
  http11_ = msg.version() >= 11;
  head_ = req.method == "HEAD";
  net::post(state_.handlers, [self = shared_from_this(), req = std::move(req)] {
    self->runHandler(req);
  });
}

// Answers a request the server refused before any handler, then closes.
void Session::reject(int status, const std::string& message) {
  resp_ = Response::error(status, message, false);
  file_.reset();
  keepAlive_ = false;
  head_ = false;
  send();
}

void Session::runHandler(const Request& req) {
  lowerThreadPriority(state_.config.threadNice);
  auto t0 = std::chrono::steady_clock::now();
  auto match = state_.router.match(req.method, req.path);
  Response resp = state_.router.handle(req, match);
  if (resp.stream) {
    streamSlot_ = ClientSlot(state_.streams, client_);
    if (!streamSlot_.taken()) {
      resp = Response::error(
          429,
          "too many live streams (at most " +
              std::to_string(state_.config.maxStreamsPerClient) +
              " per client and " + std::to_string(state_.config.maxStreams) +
              " in all); close one, or reload later",
          req.wantsJson());
      resp.headers.emplace_back("Retry-After", "10");
      keepAlive_ = false;
    }
  }
  std::optional<FileBody> file;
  if (!resp.filePath.empty() && !resp.stream) file = openFileBody(req, resp);
  if (state_.observer) {
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
    state_.observer(match.pattern, req.method, resp.status, took.count());
  }
  resp_ = std::move(resp);
  file_ = std::move(file);
  net::post(stream_.get_executor(),
            [self = shared_from_this()] { self->send(); });
}

void Session::send() {
  bool chunked = resp_.stream != nullptr;
  if (chunked && !http11_) keepAlive_ = false;  // the body ends at close
  uint64_t length = file_ ? file_->length : resp_.body.size();
  out_ = headerText(resp_, length, chunked && http11_, keepAlive_, http11_);
  std::array<net::const_buffer, 2> bufs{net::buffer(out_),
                                        net::buffer(resp_.body)};
  if (head_ || file_ || chunked) bufs[1] = net::const_buffer();
  write(bufs, &Session::afterHeaderOk);
}

void Session::afterHeaderOk() {
  if (head_) return finish();
  if (file_) return sendFileChunk();
  if (resp_.stream) {
    streamActive_ = std::chrono::steady_clock::now();
    return pollStream();
  }
  finish();
}

void Session::sendFileChunk() {
  if (file_->length == 0) return finish();
  chunk_.resize(std::min<uint64_t>(kChunkBytes, file_->length));
  ssize_t n = ::pread(file_->fd.get(), chunk_.data(), chunk_.size(),
                      static_cast<off_t>(file_->offset));
  if (n <= 0) {
    logWarn("web: reading " + resp_.filePath + " failed; closing");
    return;  // the client sees a short body
  }
  file_->offset += static_cast<uint64_t>(n);
  file_->length -= static_cast<uint64_t>(n);
  write(net::buffer(chunk_.data(), static_cast<size_t>(n)),
        &Session::sendFileChunk);
}

// Asks the stream for its next piece on a handler thread.
void Session::pollStream() {
  net::post(state_.handlers, [self = shared_from_this()] {
    lowerThreadPriority(self->state_.config.threadNice);
    self->out_.clear();
    BodyStream::Next next = BodyStream::Next::kEnd;
    bool failed = false;
    try {
      next = self->resp_.stream->next(self->out_, kChunkBytes);
    } catch (const std::exception& e) {
      logWarn(std::string("web: a streamed body failed: ") + e.what());
      failed = true;
    }
    net::post(self->stream_.get_executor(),
              [self, next, failed] { self->onStreamPiece(next, failed); });
  });
}

void Session::onStreamPiece(BodyStream::Next next, bool failed) {
  if (failed) return;  // no last chunk: the client sees a cut body
  std::string framed;
  if (!out_.empty())
    framed = http11_ ? toHex(out_.size()) + "\r\n" + out_ + "\r\n" : out_;
  if (next == BodyStream::Next::kEnd) return endStream(std::move(framed));
  if (!framed.empty()) {
    streamActive_ = std::chrono::steady_clock::now();
    out_ = std::move(framed);
    return write(net::buffer(out_), &Session::pollStream);
  }
  // Idle too long (a build that waits forever): end it and close; a
  // browser's EventSource reconnects and resumes.
  if (std::chrono::steady_clock::now() - streamActive_ >=
      state_.config.streamIdleLifetime) {
    keepAlive_ = false;
    return endStream("");
  }
  timer_.expires_after(state_.config.streamPoll);
  timer_.async_wait([self = shared_from_this()](ErrorCode ec) {
    if (!ec) self->pollStream();
  });
}

// Writes the stream's last piece and its end.
void Session::endStream(std::string last) {
  if (http11_) last += "0\r\n\r\n";
  out_ = std::move(last);
  write(net::buffer(out_), &Session::finish);
}

void Session::finish() {
  streamSlot_.release();
  resp_ = Response();
  file_.reset();
  if (keepAlive_) return waitRequest();
  closeGracefully();
}

// Sends FIN, then reads and drops what the client still sends for a short
// while, so that it reads our answer before the connection resets.
void Session::closeGracefully() {
  connSlot_.release();  // closing: no longer counted against the limits
  streamSlot_.release();
  ErrorCode ec;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
  stream_.expires_after(kLingerTimeout);
  drain();
}

void Session::drain() {
  chunk_.resize(kFirstRead);
  stream_.async_read_some(net::buffer(chunk_),
                          [self = shared_from_this()](ErrorCode ec, size_t) {
                            if (!ec) self->drain();
                          });
}

}  // namespace kiln::web
