#include "kiln/common/sqlite.h"

#include <sqlite3.h>

#include <algorithm>
#include <thread>

#include "kiln/common/retry.h"

namespace kiln {

bool SqliteError::isBusy() const {
  int primary = code_ & 0xff;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

namespace {

[[noreturn]] void throwSqlite(sqlite3* db, int rc, const std::string& file,
                              std::string_view what) {
  int ext = db ? sqlite3_extended_errcode(db) : rc;
  std::string msg = "SQLite database '" + file + "': " + std::string(what) +
                    ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  throw SqliteError(msg, ext ? ext : rc);
}

}  // namespace

// ---------------------------------------------------------------- SqliteDb

SqliteDb::SqliteDb(const std::string& path, const SqliteOptions& opts)
    : path_(path) {
  int flags = (opts.readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) |
              SQLITE_OPEN_NOMUTEX;
  if (opts.create && !opts.readOnly) flags |= SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw SqliteError("cannot open SQLite database '" + path + "': " + msg, rc);
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, static_cast<int>(opts.busyTimeout.count()));
  try {
    exec("PRAGMA foreign_keys = ON");
    if (opts.readOnly) return;
    exec(opts.fullSync ? "PRAGMA synchronous = FULL"
                       : "PRAGMA synchronous = NORMAL");
    if (opts.wal) {
      // Switching the journal mode needs a moment of exclusive access;
      // another opener may hold it, so retry.
      retrySqlite([&] {
        auto st = prepare("PRAGMA journal_mode = WAL");
        st.step();
      });
    }
  } catch (...) {
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw;
  }
}

SqliteDb::~SqliteDb() {
  if (db_) sqlite3_close_v2(db_);
}

void SqliteDb::check(int rc, std::string_view what) {
  if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return;
  throwSqlite(db_, rc, path_, what);
}

void SqliteDb::exec(std::string_view sql) {
  std::string s(sql);
  check(sqlite3_exec(db_, s.c_str(), nullptr, nullptr, nullptr),
        "executing '" + s + "'");
}

int64_t SqliteDb::lastInsertRowId() { return sqlite3_last_insert_rowid(db_); }

int64_t SqliteDb::changes() { return sqlite3_changes64(db_); }

int64_t SqliteDb::userVersion() {
  auto st = prepare("PRAGMA user_version");
  if (!st.step()) return 0;
  return st.getInt(0);
}

// -------------------------------------------------------------- SqliteStmt

SqliteStmt::SqliteStmt(SqliteDb& db, std::string_view sql)
    : db_(&db), sql_(sql) {
  db.check(sqlite3_prepare_v2(db.handle(), sql_.data(),
                              static_cast<int>(sql_.size()), &stmt_, nullptr),
           "preparing '" + sql_ + "'");
}

SqliteStmt::SqliteStmt(SqliteStmt&& o) noexcept
    : db_(o.db_), stmt_(o.stmt_), sql_(std::move(o.sql_)), next_(o.next_) {
  o.stmt_ = nullptr;
}

SqliteStmt::~SqliteStmt() {
  if (stmt_) sqlite3_finalize(stmt_);
}

SqliteStmt& SqliteStmt::bind(int64_t v) {
  db_->check(sqlite3_bind_int64(stmt_, next_++, v), "binding in '" + sql_ + "'");
  return *this;
}

SqliteStmt& SqliteStmt::bind(std::string_view v) {
  db_->check(sqlite3_bind_text64(stmt_, next_++, v.data(), v.size(),
                                 SQLITE_TRANSIENT, SQLITE_UTF8),
             "binding in '" + sql_ + "'");
  return *this;
}

SqliteStmt& SqliteStmt::bind(const std::optional<std::string>& v) {
  return v ? bind(std::string_view(*v)) : bindNull();
}

SqliteStmt& SqliteStmt::bindNull() {
  db_->check(sqlite3_bind_null(stmt_, next_++), "binding in '" + sql_ + "'");
  return *this;
}

bool SqliteStmt::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // Leave the statement reusable after a failure (e.g. SQLITE_BUSY).
  sqlite3_reset(stmt_);
  db_->check(rc, "running '" + sql_ + "'");
  return false;
}

void SqliteStmt::exec() {
  while (step()) {
  }
  reset();
}

void SqliteStmt::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  next_ = 1;
}

int64_t SqliteStmt::getInt(int col) const {
  return sqlite3_column_int64(stmt_, col);
}

std::string SqliteStmt::getStr(int col) const {
  auto* p = sqlite3_column_text(stmt_, col);
  if (!p) return {};
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

bool SqliteStmt::isNull(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}

int SqliteStmt::columnCount() const { return sqlite3_column_count(stmt_); }

// --------------------------------------------------------------- SqliteTxn

SqliteTxn::SqliteTxn(SqliteDb& db, bool immediate) : db_(db) {
  if (sqlite3_get_autocommit(db_.handle()) == 0) {
    // Inside an outer transaction: a savepoint, so that the outer one
    // commits or rolls back everything (including this) at once.
    savepoint_ = "kiln_txn_" + std::to_string(++db_.savepoints_);
    db_.exec("SAVEPOINT " + savepoint_);
    return;
  }
  db_.exec(immediate ? "BEGIN IMMEDIATE" : "BEGIN");
}

SqliteTxn::~SqliteTxn() {
  if (!active_) return;
  try {
    if (savepoint_.empty()) {
      db_.exec("ROLLBACK");
    } else {
      db_.exec("ROLLBACK TO " + savepoint_);
      db_.exec("RELEASE " + savepoint_);
    }
  } catch (...) {
    // The transaction may already have been rolled back by SQLite itself
    // (e.g. after SQLITE_FULL); nothing more can be done here.
  }
}

void SqliteTxn::commit() {
  db_.exec(savepoint_.empty() ? std::string("COMMIT")
                              : "RELEASE " + savepoint_);
  active_ = false;
}

// ------------------------------------------------------------------ retry

void retrySqlite(const std::function<void()>& fn,
                 std::chrono::milliseconds timeout) {
  retryWithBackoff<SqliteError>(
      fn, [](const SqliteError& e) { return e.isBusy(); }, timeout,
      std::chrono::milliseconds(100));
}

// -------------------------------------------------------------- migrations

int64_t migrateSchema(SqliteDb& db,
                      const std::vector<SqliteMigration>& migrations) {
  int64_t latest = migrations.empty() ? 0 : migrations.back().version;
  int64_t before = 0;
  retrySqlite([&] {
    SqliteTxn txn(db);
    before = db.userVersion();
    if (before > latest)
      throw SchemaError("database '" + db.path() + "' has schema version " +
                        std::to_string(before) +
                        ", newer than this kiln supports (" +
                        std::to_string(latest) + "); use a newer kiln");
    int64_t expect = 1;
    for (auto& m : migrations) {
      if (m.version != expect++)
        throw SchemaError("migrations for '" + db.path() +
                          "' are not numbered 1, 2, ...");
      if (m.version <= before) continue;
      db.exec(m.sql);
      db.exec("PRAGMA user_version = " + std::to_string(m.version));
    }
    txn.commit();
  });
  return before;
}

}  // namespace kiln
