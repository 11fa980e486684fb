#pragma once
/// A thin RAII layer over SQLite 3: connections, prepared statements,
/// transactions that roll back unless committed, a busy timeout plus a retry
/// helper, WAL mode, and numbered schema migrations kept in
/// `PRAGMA user_version`. Every failure throws SqliteError naming the
/// database file and the statement.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/common/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace kiln {

/// A failing SQLite call; `code()` is the extended result code.
class SqliteError : public Error {
 public:
  SqliteError(const std::string& msg, int code) : Error(msg), code_(code) {}
  int code() const { return code_; }
  /// Whether the failure is SQLITE_BUSY/SQLITE_LOCKED (worth a retry).
  bool isBusy() const;

 private:
  int code_;
};

class SqliteDb;

/// A prepared statement owned by the caller; finalized on destruction.
/// Bind parameters with the chained bind() calls (positional, 1-based in
/// order of the calls), then call step()/exec(). reset() rewinds for reuse.
class SqliteStmt {
 public:
  SqliteStmt(SqliteDb& db, std::string_view sql);
  ~SqliteStmt();
  SqliteStmt(SqliteStmt&& o) noexcept;
  SqliteStmt(const SqliteStmt&) = delete;
  SqliteStmt& operator=(const SqliteStmt&) = delete;
  SqliteStmt& operator=(SqliteStmt&&) = delete;

  /// Binds the next parameter.
  SqliteStmt& bind(int64_t v);
  SqliteStmt& bind(std::string_view v);
  SqliteStmt& bind(const char* v) { return bind(std::string_view(v)); }
  SqliteStmt& bind(const std::string& v) { return bind(std::string_view(v)); }
  /// Binds NULL when `v` is empty.
  SqliteStmt& bind(const std::optional<std::string>& v);
  SqliteStmt& bindNull();

  /// Advances to the next row; false when done. Throws SqliteError.
  bool step();
  /// Runs a statement that returns no rows (steps until done), then resets.
  void exec();
  /// Clears bindings and rewinds.
  void reset();

  /// Column accessors for the current row (0-based).
  int64_t getInt(int col) const;
  std::string getStr(int col) const;  ///< "" for NULL
  bool isNull(int col) const;
  /// How many columns the statement's rows have.
  int columnCount() const;

 private:
  SqliteDb* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
  int next_ = 1;
};

/// Options for opening a database file.
struct SqliteOptions {
  bool create = true;  ///< create the file if missing
  bool wal = true;     ///< journal_mode=WAL (persistent in the file)
  /// How long a call waits for another connection's lock before SQLITE_BUSY.
  std::chrono::milliseconds busyTimeout{60000};
  /// synchronous=FULL (durable commits) rather than NORMAL.
  bool fullSync = true;
  /// Open for reading only (SQLITE_OPEN_READONLY; no pragma that writes;
  /// `create` and `wal` are ignored). Sees what writers committed.
  bool readOnly = false;
};

/// One connection; closed on destruction. Not shared between threads
/// without outside locking. Foreign keys are enforced.
class SqliteDb {
 public:
  /// Opens (creating if allowed) `path`; throws SqliteError naming it.
  explicit SqliteDb(const std::string& path, const SqliteOptions& opts = {});
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  const std::string& path() const { return path_; }
  sqlite3* handle() { return db_; }

  /// Runs one or more statements without results.
  void exec(std::string_view sql);
  /// Prepares a statement.
  SqliteStmt prepare(std::string_view sql) { return SqliteStmt(*this, sql); }
  /// Rowid of the last successful INSERT on this connection.
  int64_t lastInsertRowId();
  /// Rows changed by the last statement.
  int64_t changes();
  /// `PRAGMA user_version`.
  int64_t userVersion();

  /// Throws SqliteError for `rc` unless it is SQLITE_OK/ROW/DONE.
  void check(int rc, std::string_view what);

 private:
  friend class SqliteTxn;
  std::string path_;
  sqlite3* db_ = nullptr;
  uint64_t savepoints_ = 0;  ///< names nested SqliteTxn savepoints
};

/// A transaction (BEGIN IMMEDIATE by default, so the write lock is taken
/// up front); rolled back on destruction unless commit() was called, so an
/// exception leaves the database unchanged. Opened while the connection is
/// already in a transaction, it is a savepoint of that one: its commit
/// releases the savepoint and the outer transaction's commit makes it
/// durable (its rollback undoes only its own changes).
class SqliteTxn {
 public:
  explicit SqliteTxn(SqliteDb& db, bool immediate = true);
  ~SqliteTxn();
  SqliteTxn(const SqliteTxn&) = delete;
  SqliteTxn& operator=(const SqliteTxn&) = delete;
  void commit();

 private:
  SqliteDb& db_;
  std::string savepoint_;  ///< empty: a transaction of its own
  bool active_ = true;
};

/// Calls `fn` until it returns without a busy/locked SqliteError, backing
/// off between attempts, for at most `timeout`; the last error propagates.
/// `fn` must be safe to repeat (e.g. a whole transaction).
void retrySqlite(const std::function<void()>& fn,
                 std::chrono::milliseconds timeout = std::chrono::minutes(2));

/// One schema step: version N is reached by running `sql` on version N-1.
struct SqliteMigration {
  int64_t version;
  std::string sql;
};

/// Brings `db` to the highest version in `migrations` (ascending, 1, 2, …)
/// inside one exclusive transaction, so concurrent openers migrate once.
/// Throws SchemaError naming the file if the database's user_version is
/// higher than any known migration (made by a newer kiln). Returns the
/// version the database had before.
int64_t migrateSchema(SqliteDb& db,
                      const std::vector<SqliteMigration>& migrations);

}  // namespace kiln
