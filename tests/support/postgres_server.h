#pragma once
/// A real PostgreSQL server for a test (the state layer's second backend):
/// scripts/start-postgres.sh under a temporary folder, on a free loopback
/// port, with a `kiln` superuser whose password only a PGPASSFILE holds;
/// optionally in a network namespace, listening on an address of its own
/// there too (a database host of tests/support/netns_lab.h).

#include <memory>
#include <string>
#include <vector>

#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln::test {

/// One server, started by the constructor and stopped (its folder
/// removed) by the destructor. Listens on 127.0.0.1 (and the address given
/// to the constructor); TCP clients give the password in passFile(). Not
/// thread-safe.
class PostgresServer {
 public:
  /// Whether a server can run here (PostgreSQL is installed, and as root
  /// there is a `postgres` user to run it); if not and `why` is given, why
  /// not (the script's message, naming the package to install).
  static bool available(std::string* why = nullptr);

  /// Makes a fresh cluster and starts it; throws Error with the script's
  /// message and the server's log tail if it cannot.
  PostgresServer();
  /// The same in the named network namespace `netns` ("": this one), the
  /// script and psql run there (`ip netns exec`), listening on
  /// `listenAddress` (one of the namespace's IPv4 addresses; "": 127.0.0.1
  /// only) too, which url() and createDatabase()'s URLs name; clients on
  /// its subnet give the password (KILN_PG_LISTEN of the script).
  PostgresServer(std::string netns, std::string listenAddress);
  /// Stops the server (fast, else immediate, else SIGKILL) and removes its
  /// folder. Never throws.
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  /// `postgresql://kiln@HOST:PORT/kiln`: the `kiln` database on 127.0.0.1
  /// or the listen address.
  const std::string& url() const { return url_; }
  /// The PGPASSFILE with the `kiln` role's password (mode 0600, ours).
  const std::string& passFile() const { return passFile_; }
  /// The TCP port on 127.0.0.1 (and the listen address).
  int port() const { return port_; }
  /// The cluster's data directory (PGDATA; postmaster.pid is there).
  std::string dataDir() const { return dir_->path() + "/data"; }
  /// The folder of the server's programs (psql, createdb, pg_dump, ...).
  const std::string& binDir() const { return bindir_; }
  /// Whether it runs: true after construction and start(), false after
  /// stop().
  bool running() const { return running_; }

  /// Stops the server (fast shutdown), keeping its data; a no-op when it
  /// is stopped. Throws Error if it does not stop.
  void stop();
  /// Starts the stopped server again on the same port and data; a no-op
  /// when it runs. Throws Error (script message, log tail) if it cannot.
  void start();

  /// Creates the database `name` (lowercase letters, digits and `_`,
  /// starting with a letter or `_`) owned by `kiln`; returns its URL.
  /// Throws Error for another name, or if createdb fails (it exists).
  std::string createDatabase(const std::string& name);

  /// Runs `sql` with psql over TCP with the password from passFile(), on
  /// `url` (default: url()), in the server's namespace, unaligned, tuples only,
  /// stopping at the first error (ON_ERROR_STOP). Does not throw for SQL
  /// errors: see exitCode.
  RunResult psql(const std::string& sql, const std::string& url = "") const;

  /// The last lines of the server's log (DIR/log/postgres.log), for
  /// failure messages.
  std::string logTail() const;

 private:
  /// Runs the script with `args`; throws Error naming `what` on failure.
  RunResult script(const std::vector<std::string>& args,
                   const std::string& what) const;
  /// Runs `DIR PORT` and takes the URL and PGPASSFILE it prints.
  void startScript();
  /// test::run of `argv` in the server's namespace with PGPASSFILE and a
  /// connect timeout in its environment.
  RunResult runThere(std::vector<std::string> argv) const;

  std::string netns_;   ///< "": the test's
  std::string listen_;  ///< KILN_PG_LISTEN, "" for 127.0.0.1 only
  std::string bindir_;
  std::unique_ptr<TempDir> dir_;
  int port_ = 0;
  std::string url_;
  std::string passFile_;
  bool running_ = false;
};

/// A hung server for as long as it lives: the postmaster and its children
/// are stopped (SIGSTOP, the postmaster first so that it forks no more);
/// connections stay open and nothing answers. resume() or the destructor
/// sends them SIGCONT, so a failing test never leaves the server stopped.
class PostgresPause {
 public:
  /// Stops `server`'s processes; throws Error if its postmaster.pid cannot
  /// be read.
  explicit PostgresPause(const PostgresServer& server);
  ~PostgresPause() { resume(); }
  PostgresPause(const PostgresPause&) = delete;
  PostgresPause& operator=(const PostgresPause&) = delete;
  /// Resumes the processes (once; later calls do nothing). Never throws.
  void resume() noexcept;
  /// How many processes were stopped (the postmaster included).
  size_t stopped() const { return pids_.size(); }

 private:
  std::vector<int> pids_;  ///< the postmaster first
  bool resumed_ = false;
};

/// In a GoogleTest body: skips the test unless PostgresServer::available().
#define KILN_SKIP_UNLESS_POSTGRES()                                      \
  if (std::string why_; !::kiln::test::PostgresServer::available(&why_)) \
  GTEST_SKIP() << why_

}  // namespace kiln::test
