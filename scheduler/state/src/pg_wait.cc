// Waiting for a PostgreSQL server with a deadline (pg_wait.h).
#include "pg_wait.h"

#include <poll.h>

#include <atomic>
#include <cerrno>
#include <system_error>
#include <thread>

namespace kiln::scheduler::detail {
namespace {
/// Cancel requests waiting for their server at once.
constexpr int kMaxCancelsInFlight = 4;
std::atomic<int> cancelsInFlight{0};
}  // namespace

PgWait awaitResult(PGconn* c, std::chrono::milliseconds timeout) {
  // A deadline on a real socket: the steady clock, as libpq's own timeouts.
  using Steady = std::chrono::steady_clock;
  auto deadline = Steady::now() + timeout;
  for (;;) {
    int pending = PQflush(c);  // 1: output left to send
    if (pending < 0) return PgWait::kFailed;
    if (pending == 0 && !PQisBusy(c)) return PgWait::kReady;
    int waitMs = -1;
    if (timeout.count() > 0) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline -
                                                               Steady::now());
      if (left.count() <= 0) return PgWait::kTimedOut;
      waitMs = static_cast<int>(left.count());
    }
    pollfd p{PQsocket(c), static_cast<short>(POLLIN | (pending ? POLLOUT : 0)),
             0};
    if (p.fd < 0) return PgWait::kFailed;
    int n = ::poll(&p, 1, waitMs);
    if (n < 0 && errno != EINTR) return PgWait::kFailed;
    // A read failing marks the connection bad: PQgetResult then returns
    // what the server said before it closed (its FATAL, with SQLSTATE) or
    // libpq's error, without waiting.
    if (n > 0 && (p.revents & (POLLIN | POLLERR | POLLHUP)) &&
        !PQconsumeInput(c))
      return PQstatus(c) == CONNECTION_OK ? PgWait::kFailed : PgWait::kReady;
  }
}

void cancelInBackground(PGconn* c) {
  PGcancel* cancel = PQgetCancel(c);
  if (!cancel) return;
  if (cancelsInFlight.fetch_add(1) >= kMaxCancelsInFlight) {
    cancelsInFlight.fetch_sub(1);
    PQfreeCancel(cancel);
    return;
  }
  try {
    std::thread([cancel] {
      char err[256];
      PQcancel(cancel, err, sizeof err);  // best effort: nothing to report to
      PQfreeCancel(cancel);
      cancelsInFlight.fetch_sub(1);
    }).detach();
  } catch (const std::system_error&) {  // no thread: the close must do
    cancelsInFlight.fetch_sub(1);
    PQfreeCancel(cancel);
  }
}

}  // namespace kiln::scheduler::detail
