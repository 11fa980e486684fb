// The PostgreSQL listener of sql_listener.h: a thread with a libpq
// connection of its own that runs LISTEN, then waits on the connection's
// socket (and a stop descriptor) with poll(); each notification, and each
// (re)connection, makes an eventfd readable for the waiting loop. A lost
// connection is opened again with backoff.
#include "kiln/scheduler/sql_listener.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/logging.h"
#include "kiln/scheduler/sql.h"
#include "pg_connect.h"

namespace kiln::scheduler {
namespace {

AutoCloseFD makeEventFd(const char* what) {
  AutoCloseFD fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!fd) throwSysError(std::string("creating the ") + what + " eventfd");
  return fd;
}

// Adds one to the eventfd `fd` (it stays readable until drained).
void signalFd(int fd) {
  uint64_t one = 1;
  if (::write(fd, &one, sizeof one) < 0)
    logWarn(std::string("signalling an eventfd: ") + strerror(errno));
}

// Drains the eventfd `fd`; whether it was signalled.
bool drainFd(int fd) {
  uint64_t n = 0;
  return ::read(fd, &n, sizeof n) == static_cast<ssize_t>(sizeof n) && n > 0;
}

class PostgresListener : public SqlListener {
 public:
  PostgresListener(std::string url, std::string password, std::string channel,
                   SqlListenerOptions options)
      : url_(std::move(url)),
        password_(std::move(password)),
        channel_(std::move(channel)),
        options_(options),
        wake_(makeEventFd("listener's wake")),
        stop_(makeEventFd("listener's stop")),
        thread_([this] { run(); }) {}

  ~PostgresListener() override {
    signalFd(stop_.get());
    thread_.join();
  }

  int wakeFd() const override { return wake_.get(); }
  bool take() override { return drainFd(wake_.get()); }
  bool listening() const override { return listening_.load(); }

 private:
  void run() noexcept;
  // One connection: opened, LISTENing, served until lost or stopped.
  // Throws SqlError when it cannot be opened.
  void connectAndServe();
  PgConn connectAndListen();
  // Waits for notifications on `conn` until it is lost or the listener
  // stops.
  void serve(PGconn* conn);
  // Waits up to `timeout` for the stop descriptor; whether it was set.
  bool waitForStop(std::chrono::milliseconds timeout) const;
  bool stopping() const { return waitForStop(std::chrono::milliseconds(0)); }

  const std::string url_, password_, channel_;
  const SqlListenerOptions options_;
  AutoCloseFD wake_;  ///< readable while a wake-up waits
  AutoCloseFD stop_;  ///< readable once the destructor runs
  std::atomic<bool> listening_{false};
  std::thread thread_;  ///< last: starts when the rest is ready
};

bool PostgresListener::waitForStop(std::chrono::milliseconds timeout) const {
  pollfd p{stop_.get(), POLLIN, 0};
  int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  return r > 0 && (p.revents & POLLIN);
}

void PostgresListener::run() noexcept {
  auto backoff = options_.minBackoff;
  const Clock& clock = options_.clock ? *options_.clock : RealClock::instance();
  bool away = false;  // an outage is being retried (logged once)
  while (!stopping()) {
    try {
      auto start = clock.now();
      connectAndServe();
      if (stopping()) break;
      logInfo("lost the connection listening on " + url_);
      away = false;
      // Lost after a while: try again at once. Lost at once: back off, so
      // a server that drops every connection is not hammered.
      if (clock.now() - start >= options_.maxBackoff) {
        backoff = options_.minBackoff;
        continue;
      }
    } catch (const std::exception& e) {
      listening_ = false;
      if (!away)
        logWarn("cannot listen for " + channel_ + " on the state database " +
                "(retrying; polling meanwhile): " + e.what());
      away = true;
    }
    if (waitForStop(backoff)) break;
    backoff = std::min(backoff * 2, options_.maxBackoff);
  }
  listening_ = false;
}

void PostgresListener::connectAndServe() {
  PgConn conn = connectAndListen();
  listening_ = true;
  // Something may have been notified while no connection listened.
  signalFd(wake_.get());
  serve(conn.get());
  listening_ = false;
}

PgConn PostgresListener::connectAndListen() {
  // connectPostgres's keepalives: a silent server is noticed within ~11 s
  // and the listener reconnects instead of waiting on a dead socket.
  PgConn conn = connectPostgres(url_, password_);
  char* quoted =
      PQescapeIdentifier(conn.get(), channel_.c_str(), channel_.size());
  if (!quoted) throw SqlError("quoting channel " + channel_, false);
  std::string sql = "LISTEN " + std::string(quoted);
  PQfreemem(quoted);
  PGresult* r = PQexec(conn.get(), sql.c_str());
  bool ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
  std::string msg = ok ? "" : PQerrorMessage(conn.get());
  PQclear(r);
  if (!ok) throw SqlError("PostgreSQL " + url_ + ": " + sql + ": " + msg, true);
  return conn;
}

void PostgresListener::serve(PGconn* conn) {
  if (PQsocket(conn) < 0) return;
  for (;;) {
    pollfd fds[2] = {{stop_.get(), POLLIN, 0}, {PQsocket(conn), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      logWarn(std::string("listener poll: ") + strerror(errno));
      return;
    }
    if (fds[0].revents & POLLIN) return;
    // Reads what arrived; fails (0) on end of file or a broken socket.
    if (!PQconsumeInput(conn) || PQstatus(conn) != CONNECTION_OK) return;
    bool notified = false;
    while (PGnotify* n = PQnotifies(conn)) {
      notified = true;
      PQfreemem(n);
    }
    if (notified) signalFd(wake_.get());
  }
}

}  // namespace

std::unique_ptr<SqlListener> listenPostgres(const std::string& url,
                                            const std::string& passwordFile,
                                            const std::string& channel,
                                            SqlListenerOptions options) {
  checkDatabaseUrl(url);
  if (url.empty()) throw SqlError("no PostgreSQL URL to listen on", false);
  return std::make_unique<PostgresListener>(
      url, readPostgresPassword(passwordFile), channel, options);
}

}  // namespace kiln::scheduler
