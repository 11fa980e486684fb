#pragma once
// Waiting for a PostgreSQL server's answer with a deadline, and cancelling
// what it runs, for the backend of sql.h (sql_postgres.cc): a server that
// hangs without closing the connection (stopped, a lock wait that never
// ends) costs a statement its deadline, not the caller's thread.
#include <libpq-fe.h>

#include <chrono>

namespace kiln::scheduler::detail {

/// How waiting for a result ended.
enum class PgWait {
  kReady,     ///< PQgetResult will not block (the connection may be bad)
  kFailed,    ///< the connection failed (PQerrorMessage says why)
  kTimedOut,  ///< nothing complete arrived within the timeout
};

/// Sends what is queued on `c` (a non-blocking connection) and reads the
/// server's answer until a result (or the NULL ending one) can be taken
/// without blocking, or `timeout` passes (0: no limit).
PgWait awaitResult(PGconn* c, std::chrono::milliseconds timeout);

/// Asks the server to cancel what `c` runs. libpq 15's PQcancel waits for
/// the server's answer (for a stopped server, until it resumes), so it
/// runs on a detached thread owning its own PGcancel; `c` may be closed
/// at once. At most a few run at a time; past that the request is skipped
/// (closing the connection ends the statement when the server resumes).
void cancelInBackground(PGconn* c);

}  // namespace kiln::scheduler::detail
