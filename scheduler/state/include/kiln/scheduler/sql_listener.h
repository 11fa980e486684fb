#pragma once
/// Wake-ups from the state database (docs/scheduler.md, "Requests"): a
/// writer calls SqlConnection::notify(channel) in the transaction that
/// changes something another process acts on; a listener on that channel
/// makes a descriptor readable when the transaction commits, so the other
/// process's loop (which polls the descriptor with its sockets) reacts at
/// once instead of on its next poll. PostgreSQL only (LISTEN/NOTIFY on a
/// connection of the listener's own); SQLite has no listener: its one
/// writer process polls.

#include <chrono>
#include <memory>
#include <string>

#include "kiln/common/clock.h"

namespace kiln::scheduler {

/// A listener's side of the wake-ups, as the waiting loop sees it.
/// wakeFd() and take() belong to one thread; listening() to any.
class SqlListener {
 public:
  virtual ~SqlListener() = default;
  /// A descriptor that is readable while a wake-up waits; poll it with
  /// the loop's others, then call take().
  virtual int wakeFd() const = 0;
  /// Whether a wake-up came since the last call: a notification, or a
  /// (re)connection, after which one may have been missed (look at what
  /// changed once). Clears wakeFd().
  virtual bool take() = 0;
  /// Whether the listener is connected and listening now: while it is,
  /// every committed notification wakes it, and polling can be rare.
  virtual bool listening() const = 0;
};

/// How a listener reconnects.
struct SqlListenerOptions {
  /// The pause after a failed connection attempt, doubling up to
  /// maxBackoff while the database stays away.
  std::chrono::milliseconds minBackoff{50};
  std::chrono::milliseconds maxBackoff{2000};
  /// Tells how long a connection lasted (a short one backs off). Not
  /// owned; null: RealClock::instance().
  const Clock* clock = nullptr;
};

/// Listens on `channel` (an SQL identifier) of the PostgreSQL database
/// `url` (password as for openPostgresConnection) on a thread and
/// connection of its own, until destroyed. It connects in the background:
/// a database that is away, refuses or goes away later (a restart, a lost
/// network) is retried with backoff, logged once per outage, and each
/// connection wakes once. Throws SqlError for a bad URL or password file,
/// SysError if the descriptors cannot be made; nothing later.
std::unique_ptr<SqlListener> listenPostgres(const std::string& url,
                                            const std::string& passwordFile,
                                            const std::string& channel,
                                            SqlListenerOptions options = {});

}  // namespace kiln::scheduler
