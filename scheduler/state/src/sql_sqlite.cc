// The SQLite backend of sql.h, over common's SqliteDb: SqliteError becomes
// SqlError (transient when the file was busy or locked).
#include <cstdlib>

#include "kiln/common/sqlite.h"
#include "kiln/scheduler/sql.h"

namespace kiln::scheduler {
namespace {

[[noreturn]] void rethrow(const SqliteError& e) {
  throw SqlError(e.what(), e.isBusy());
}

class SqliteStmtImpl : public SqlStmtImpl {
 public:
  SqliteStmtImpl(SqliteDb& db, std::string_view sql) : s_(db.prepare(sql)) {}

  void bindInt(int64_t v) override { s_.bind(v); }
  void bindText(std::string_view v) override { s_.bind(v); }
  void bindNull() override { s_.bindNull(); }
  // The statement casts the parameter to a BLOB (blobParam).
  void bindBlob(std::string_view v) override { s_.bind(v); }
  bool step() override {
    try {
      return s_.step();
    } catch (const SqliteError& e) {
      rethrow(e);
    }
  }
  void reset() override { s_.reset(); }
  int64_t getInt(int col) const override { return s_.getInt(col); }
  double getDouble(int col) const override {
    return std::strtod(s_.getStr(col).c_str(), nullptr);
  }
  std::string getStr(int col) const override { return s_.getStr(col); }
  std::string getBlob(int col) const override { return s_.getStr(col); }
  bool isNull(int col) const override { return s_.isNull(col); }
  int columnCount() const override { return s_.columnCount(); }

 private:
  SqliteStmt s_;
};

class SqliteConnection : public SqlConnection {
 public:
  SqliteConnection(const std::string& path, const SqliteOptions& o)
      : db_(path, o) {}

  SqlDialect dialect() const override { return SqlDialect::kSqlite; }
  const std::string& describe() const override { return db_.path(); }
  SqlStmt prepare(std::string_view sql) override {
    try {
      return SqlStmt(std::make_unique<SqliteStmtImpl>(db_, sql));
    } catch (const SqliteError& e) {
      rethrow(e);
    }
  }
  void exec(std::string_view sql) override {
    try {
      db_.exec(sql);
    } catch (const SqliteError& e) {
      rethrow(e);
    }
  }
  int64_t changes() override { return db_.changes(); }
  void notify(std::string_view) override {}
  int64_t userVersion() override { return db_.userVersion(); }
  void setUserVersion(int64_t v) override {
    exec("PRAGMA user_version = " + std::to_string(v));
  }

 protected:
  std::string_view beginSql() const override { return "BEGIN IMMEDIATE"; }

 private:
  SqliteDb db_;
};

}  // namespace

std::unique_ptr<SqlConnection> openSqliteConnection(const std::string& path,
                                                    SqlAccess access) {
  SqliteOptions o;
  o.fullSync = false;  // WAL + NORMAL: durable across a process crash
  o.readOnly = access == SqlAccess::kRead;
  o.create = access == SqlAccess::kCreate;
  try {
    return std::make_unique<SqliteConnection>(path, o);
  } catch (const SqliteError& e) {
    rethrow(e);
  }
}

}  // namespace kiln::scheduler
