#pragma once
/// The state layer's database connection, one interface over two backends
/// (docs/scheduler.md, "State"): SQLite (a file under `--state-dir`, the
/// embedded default) and PostgreSQL (libpq; `--database postgresql://…`).
/// The state code writes one SQL text for both, with `?` placeholders; the
/// few spellings that differ ask dialect(). Every failure throws SqlError,
/// whose transient() says whether repeating the whole transaction may work
/// (a busy SQLite file, a lost PostgreSQL connection, a serialization
/// failure or deadlock, a server shutting down or starting up).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kiln/common/error.h"

namespace kiln::scheduler {

/// A failing database call on either backend, naming the database (file or
/// URL without password) and the statement.
class SqlError : public Error {
 public:
  SqlError(const std::string& msg, bool transient)
      : Error(msg), transient_(transient) {}
  /// Whether the same transaction may succeed if run again.
  bool transient() const { return transient_; }

 private:
  bool transient_;
};

/// Which SQL the connection speaks.
enum class SqlDialect { kSqlite, kPostgres };

/// A backend's statement (sql_sqlite.cc, sql_postgres.cc).
class SqlStmtImpl {
 public:
  virtual ~SqlStmtImpl() = default;
  virtual void bindInt(int64_t v) = 0;
  virtual void bindText(std::string_view v) = 0;
  virtual void bindNull() = 0;
  virtual void bindBlob(std::string_view v) = 0;
  virtual bool step() = 0;
  virtual void reset() = 0;
  /// Runs a statement whose rows nobody reads, then resets it (a backend
  /// may send it without waiting for its result: sql_postgres.cc).
  virtual void execute() {
    while (step()) {
    }
    reset();
  }
  virtual int64_t getInt(int col) const = 0;
  virtual double getDouble(int col) const = 0;
  virtual std::string getStr(int col) const = 0;
  virtual std::string getBlob(int col) const = 0;
  virtual bool isNull(int col) const = 0;
  virtual int columnCount() const = 0;
};

/// A prepared statement owned by the caller. Bind parameters with the
/// chained bind() calls (positional, in the order of the `?`s), then
/// step() through the rows or exec() a statement without rows.
class SqlStmt {
 public:
  explicit SqlStmt(std::unique_ptr<SqlStmtImpl> impl)
      : impl_(std::move(impl)) {}

  /// Binds the next parameter.
  SqlStmt& bind(int64_t v) {
    impl_->bindInt(v);
    return *this;
  }
  SqlStmt& bind(int v) { return bind(int64_t{v}); }
  SqlStmt& bind(std::string_view v) {
    impl_->bindText(v);
    return *this;
  }
  SqlStmt& bind(const char* v) { return bind(std::string_view(v)); }
  SqlStmt& bind(const std::string& v) { return bind(std::string_view(v)); }
  /// Binds NULL when `v` is empty.
  SqlStmt& bind(const std::optional<std::string>& v) {
    return v ? bind(*v) : bindNull();
  }
  SqlStmt& bindNull() {
    impl_->bindNull();
    return *this;
  }
  /// Binds bytes for a BLOB (SQLite) or BYTEA (PostgreSQL) column; the
  /// statement spells the parameter blobParam(dialect).
  SqlStmt& bindBlob(std::string_view v) {
    impl_->bindBlob(v);
    return *this;
  }

  /// Advances to the next row (runs the statement on the first call);
  /// false when done. Throws SqlError.
  bool step() { return impl_->step(); }
  /// Runs a statement that returns no rows, then resets it. Inside a
  /// transaction, PostgreSQL may report its failure later, by the commit
  /// of the innermost transaction at the latest.
  void exec() { impl_->execute(); }
  /// Clears bindings and rewinds.
  void reset() { impl_->reset(); }

  /// Column accessors for the current row (0-based). getInt reads a
  /// boolean as 0 or 1; getStr gives "" for NULL.
  int64_t getInt(int col) const { return impl_->getInt(col); }
  double getDouble(int col) const { return impl_->getDouble(col); }
  std::string getStr(int col) const { return impl_->getStr(col); }
  /// The bytes of a BLOB (BYTEA) column; "" for NULL.
  std::string getBlob(int col) const { return impl_->getBlob(col); }
  bool isNull(int col) const { return impl_->isNull(col); }
  int columnCount() const { return impl_->columnCount(); }

 private:
  std::unique_ptr<SqlStmtImpl> impl_;
};

/// One connection to the state database; not shared between threads.
/// Transactions nest (an inner one is a savepoint).
class SqlConnection {
 public:
  virtual ~SqlConnection() = default;
  virtual SqlDialect dialect() const = 0;
  /// The database for messages: the SQLite file, or the URL (which never
  /// holds a password).
  virtual const std::string& describe() const = 0;
  /// Prepares `sql` (one statement, `?` placeholders).
  virtual SqlStmt prepare(std::string_view sql) = 0;
  /// Prepares `sql` as prepare() does, planned again at each run for the
  /// values bound. On PostgreSQL it is parsed and planned with them each
  /// time instead of being a server-side prepared statement, whose cached
  /// plan would keep a choice made while a table was small (a scan of the
  /// whole table to look up a few hundred keys); SQLite's plan does not
  /// depend on the table's size. The first way a text is prepared on a
  /// connection is the one it keeps.
  virtual SqlStmt prepareEachRun(std::string_view sql) { return prepare(sql); }
  /// Runs one or more statements without parameters or results.
  virtual void exec(std::string_view sql) = 0;
  /// Rows changed by the last INSERT, UPDATE or DELETE on this connection.
  virtual int64_t changes() = 0;
  /// The schema version recorded in the database (0: none yet).
  virtual int64_t userVersion() = 0;
  /// Records `v` as the schema version, inside the migration transaction.
  virtual void setUserVersion(int64_t v) = 0;
  /// Sends a notification on `channel` (an SQL identifier) to the
  /// database's listeners (sql_listener.h): PostgreSQL's pg_notify,
  /// delivered when the surrounding transaction commits (and dropped if it
  /// rolls back), at once outside one. A no-op on SQLite, whose only
  /// writer polls.
  virtual void notify(std::string_view channel) = 0;
  /// Whether the server is known to have ended the connection's session,
  /// seen without a round trip (PostgreSQL: an idle connection's socket
  /// holds the server's goodbye, pg_terminate_backend's or a shutdown's,
  /// or is closed; a connection never opened or lost counts as ended).
  /// Nothing is re-opened. SQLite: false.
  virtual bool sessionEnded() { return false; }
  /// How long a statement may wait for the server's answer (PostgreSQL:
  /// each round trip; 0 = no limit). When it passes, the statement is
  /// cancelled, the connection dropped (re-opened between transactions)
  /// and a transient SqlError thrown, as for a lost connection. SQLite:
  /// ignored (its busy timeout bounds its waits).
  virtual void setQueryTimeout(std::chrono::milliseconds timeout) {
    (void)timeout;
  }
  /// The limit set by setQueryTimeout (0: none).
  virtual std::chrono::milliseconds queryTimeout() const { return {}; }
  /// Whether the connection is in a transaction.
  bool inTransaction() const { return depth_ > 0; }
  /// Runs `setup` on this connection now and, on PostgreSQL, again on
  /// every session a lost connection is re-opened with, before any other
  /// statement; what it throws fails the statement that re-opened it (and
  /// the session is dropped, so the next statement tries again). Replaces
  /// an earlier setup. Used by the scheduler to fence its writes
  /// (scheduler_lock.h).
  virtual void setSessionSetup(std::function<void(SqlConnection&)> setup) {
    setup(*this);
  }

  /// A transaction (RAII): begun on construction, taking the write lock up
  /// front on SQLite; rolled back on destruction unless commit() ran, so an
  /// exception leaves the state unchanged. Inside another one it is a
  /// savepoint: its commit keeps its changes for the outer commit.
  class Txn {
   public:
    explicit Txn(SqlConnection& c);
    ~Txn();
    Txn(const Txn&) = delete;
    Txn& operator=(const Txn&) = delete;
    void commit();

   private:
    SqlConnection& c_;
    std::string savepoint_;  ///< empty: a transaction of its own
    bool active_ = true;
  };

 protected:
  /// The statement that opens an outermost write transaction.
  virtual std::string_view beginSql() const = 0;
  /// Called when an outermost transaction ends (commit or rollback).
  virtual void transactionEnded() {}

 private:
  int depth_ = 0;
  uint64_t savepoints_ = 0;
};

/// A connection's query timeout raised to at least `atLeast` (0: no limit)
/// while this lives (RAII), for bulk work on a connection whose usual
/// limit is short (the scheduler's ingestion batches).
class QueryTimeoutAtLeast {
 public:
  QueryTimeoutAtLeast(SqlConnection& c, std::chrono::milliseconds atLeast)
      : c_(c), before_(c.queryTimeout()) {
    bool unlimited = before_.count() == 0 || atLeast.count() == 0;
    c_.setQueryTimeout(unlimited ? std::chrono::milliseconds(0)
                                 : std::max(before_, atLeast));
  }
  ~QueryTimeoutAtLeast() { c_.setQueryTimeout(before_); }
  QueryTimeoutAtLeast(const QueryTimeoutAtLeast&) = delete;
  QueryTimeoutAtLeast& operator=(const QueryTimeoutAtLeast&) = delete;

 private:
  SqlConnection& c_;
  std::chrono::milliseconds before_;
};

/// The query timeout of a PostgreSQL connection unless set otherwise
/// (SqlConnection::setQueryTimeout): bulk work and the commands, whose
/// valid statements may take long on a loaded server.
inline constexpr std::chrono::milliseconds kBulkQueryTimeout{300000};
/// The scheduler's loop connections' default (`--database-timeout-ms`).
inline constexpr std::chrono::milliseconds kLoopQueryTimeout{5000};
/// The scheduler's ingestion batches (on its loop connection).
inline constexpr std::chrono::milliseconds kIngestQueryTimeout{60000};

/// How a statement spells a parameter bound with bindBlob: on SQLite the
/// bytes are bound as text and cast (byte for byte) to a BLOB, so that
/// length() and substr() count bytes; on PostgreSQL they are sent binary.
inline const char* blobParam(SqlDialect d) {
  return d == SqlDialect::kSqlite ? "CAST(? AS BLOB)" : "?";
}

/// How a connection may use its database.
enum class SqlAccess {
  kCreate,  ///< read and write; SQLite creates the file if missing
  kWrite,   ///< read and write an existing database
  kRead,    ///< read only (SQLite: a read-only connection)
};

/// Opens the SQLite file `path`, WAL mode, foreign keys on. Throws
/// SqlError naming the file.
std::unique_ptr<SqlConnection> openSqliteConnection(const std::string& path,
                                                    SqlAccess access);

/// Opens a PostgreSQL connection to `url` (`postgresql://user@host:port/db`
/// or `postgres://…`). A password in the URL is refused (it would show in
/// process listings); libpq reads it from PGPASSFILE (or ~/.pgpass), or
/// from `passwordFile` when not empty (its first line). Statements wait at
/// most `queryTimeout` for the server (setQueryTimeout); connecting waits
/// as long, within 2..10 s. Throws SqlError.
std::unique_ptr<SqlConnection> openPostgresConnection(
    const std::string& url, const std::string& passwordFile = "",
    std::chrono::milliseconds queryTimeout = kBulkQueryTimeout);

/// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code
/// points past U+10FFFF): all PostgreSQL's text columns take.
bool isUtf8(std::string_view s);

/// Throws SqlError unless `url` is empty or a PostgreSQL URL without a
/// password (checked without connecting).
void checkDatabaseUrl(const std::string& url);

/// Calls `fn` until it returns without a transient SqlError, backing off
/// (1 ms doubling to 1 s) for at most `timeout`; the last error
/// propagates. `fn` must be safe to repeat (e.g. a whole transaction).
void retryTransient(
    const std::function<void()>& fn,
    std::chrono::milliseconds timeout = std::chrono::minutes(2));

}  // namespace kiln::scheduler
