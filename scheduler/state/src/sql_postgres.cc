// The PostgreSQL backend of sql.h, over libpq. Statements are prepared once
// per connection (named server-side statements, `?` rewritten to `$n`) and
// run with text parameters (binary for bytes: bindBlob) and text results
// (BYTEA's text form is decoded by getBlob). A connection lost outside a
// transaction is re-opened on the next call; lost inside one, every call
// fails (transient) until the transaction ends, so no statement of it runs
// on a fresh connection outside it.
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <unordered_map>
#include <vector>

#include "kiln/common/file.h"
#include "kiln/scheduler/sql.h"
#include "kiln/scheduler/state_db.h"  // SchedulerStateError
#include "pg_connect.h"

namespace kiln::scheduler {
namespace {

struct ResultFree {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultFree>;

// Whether SQLSTATE `state` names a failure worth running the transaction
// again for: connection exceptions (08), serialization failure, deadlock,
// too many connections, and a server shutting down or starting up.
bool transientState(const std::string& state) {
  return state.starts_with("08") || state == "40001" || state == "40P01" ||
         state == "53300" || state == "57P01" || state == "57P02" ||
         state == "57P03";
}

// `sql` with each `?` outside quotes, identifiers and comments as `$1`,
// `$2`, …; `count` receives how many.
std::string numberPlaceholders(std::string_view sql, int& count) {
  std::string out;
  out.reserve(sql.size() + 16);
  count = 0;
  char quote = 0;
  for (size_t i = 0; i < sql.size(); ++i) {
    char c = sql[i];
    if (quote) {
      out += c;
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      size_t end = sql.find('\n', i);
      if (end == std::string_view::npos) end = sql.size();
      out.append(sql.substr(i, end - i));
      i = end - 1;
    } else if (c == '?') {
      out += '$' + std::to_string(++count);
    } else {
      out += c;
    }
  }
  return out;
}

class PostgresConnection;

// A bound parameter: its text (or bytes, when `binary`), or NULL.
struct Param {
  std::optional<std::string> value;
  bool binary = false;
};

class PostgresStmt : public SqlStmtImpl {
 public:
  PostgresStmt(PostgresConnection& c, std::string sql, int params)
      : c_(c), sql_(std::move(sql)), params_(params) {}

  void bindInt(int64_t v) override { push(std::to_string(v)); }
  void bindText(std::string_view v) override {
    // PostgreSQL would refuse the statement (and with it the transaction):
    // say what is wrong with the caller's text instead.
    if (!isUtf8(v) || v.find('\0') != std::string_view::npos)
      throw SchedulerStateError(
          "text is not valid UTF-8 (or holds a NUL byte), which a "
          "PostgreSQL state database cannot store or compare");
    push(std::string(v));
  }
  void bindNull() override { push(std::nullopt); }
  void bindBlob(std::string_view v) override {
    push(std::string(v));
    values_.back().binary = true;
  }
  bool step() override;
  void reset() override {
    values_.clear();
    res_.reset();
    row_ = -1;
  }
  int64_t getInt(int col) const override;
  double getDouble(int col) const override {
    return std::strtod(PQgetvalue(res_.get(), row_, col), nullptr);
  }
  std::string getStr(int col) const override {
    check(col);
    return std::string(PQgetvalue(res_.get(), row_, col),
                       PQgetlength(res_.get(), row_, col));
  }
  std::string getBlob(int col) const override;
  bool isNull(int col) const override {
    check(col);
    return PQgetisnull(res_.get(), row_, col) != 0;
  }
  int columnCount() const override { return res_ ? PQnfields(res_.get()) : 0; }

 private:
  void push(std::optional<std::string> v) {
    if (static_cast<int>(values_.size()) >= params_)
      throw SqlError("too many parameters bound to '" + sql_ + "'", false);
    values_.push_back({std::move(v), false});
  }
  void check(int col) const {
    if (!res_ || row_ < 0 || row_ >= PQntuples(res_.get()) || col < 0 ||
        col >= PQnfields(res_.get()))
      throw SqlError("no column " + std::to_string(col) + " in '" + sql_ + "'",
                     false);
  }

  PostgresConnection& c_;
  std::string sql_;
  int params_;
  std::vector<Param> values_;
  Result res_;
  int row_ = -1;
};

class PostgresConnection : public SqlConnection {
 public:
  PostgresConnection(std::string url, std::string password)
      : url_(std::move(url)), password_(std::move(password)) {
    connect();
  }
  ~PostgresConnection() override {
    if (conn_) PQfinish(conn_);
  }

  SqlDialect dialect() const override { return SqlDialect::kPostgres; }
  const std::string& describe() const override { return url_; }

  SqlStmt prepare(std::string_view sql) override {
    std::string text(sql);
    auto it = names_.find(text);
    if (it == names_.end()) {
      ensureUsable(text);
      int params = 0;
      std::string numbered = numberPlaceholders(sql, params);
      Prepared p{"k" + std::to_string(names_.size() + 1), params};
      Result r(PQprepare(conn_, p.name.c_str(), numbered.c_str(), 0, nullptr));
      checkResult(r.get(), "preparing '" + text + "'");
      it = names_.emplace(text, p).first;
    }
    return SqlStmt(
        std::make_unique<PostgresStmt>(*this, text, it->second.params));
  }

  void exec(std::string_view sql) override {
    std::string text(sql);
    ensureUsable(text);
    Result r(PQexec(conn_, text.c_str()));
    checkResult(r.get(), "executing '" + text + "'");
    const char* n = PQcmdTuples(r.get());
    changes_ = n && *n ? std::strtoll(n, nullptr, 10) : 0;
  }

  int64_t changes() override { return changes_; }

  void notify(std::string_view channel) override {
    prepare("SELECT pg_notify(?, '')").bind(channel).exec();
  }

  int64_t userVersion() override {
    auto exists = prepare("SELECT to_regclass('kiln_schema') IS NOT NULL");
    if (!exists.step() || exists.getInt(0) == 0) return 0;
    auto s = prepare("SELECT coalesce(max(version), 0) FROM kiln_schema");
    return s.step() ? s.getInt(0) : 0;
  }
  void setUserVersion(int64_t v) override {
    exec("CREATE TABLE IF NOT EXISTS kiln_schema (version BIGINT NOT NULL)");
    exec("DELETE FROM kiln_schema");
    exec("INSERT INTO kiln_schema (version) VALUES (" + std::to_string(v) +
         ")");
  }

  /// Runs `sql`, prepared on this connection (again if it was re-opened
  /// since), with `values` (for PostgresStmt).
  Result run(const std::string& sql, const std::vector<Param>& values) {
    ensureUsable(sql);
    if (!names_.count(sql)) {
      // Re-opened since the statement was prepared: prepare it again.
      prepare(sql);
    }
    const std::string& current = names_.at(sql).name;
    std::vector<const char*> v;
    std::vector<int> lengths, formats;
    for (auto& x : values) {
      v.push_back(x.value ? x.value->data() : nullptr);
      lengths.push_back(x.value ? static_cast<int>(x.value->size()) : 0);
      formats.push_back(x.binary ? 1 : 0);
    }
    Result r(PQexecPrepared(conn_, current.c_str(), static_cast<int>(v.size()),
                            v.data(), lengths.data(), formats.data(), 0));
    checkResult(r.get(), "running '" + sql + "'");
    const char* n = PQcmdTuples(r.get());
    if (n && *n) changes_ = std::strtoll(n, nullptr, 10);
    return r;
  }

  void setSessionSetup(std::function<void(SqlConnection&)> setup) override {
    setup_ = std::move(setup);
    if (conn_ && PQstatus(conn_) == CONNECTION_OK)
      runSetup();
    else
      ensureUsable("the session's setup");  // connects, with the setup
  }

 protected:
  std::string_view beginSql() const override { return "BEGIN"; }
  void transactionEnded() override { lostInTransaction_ = false; }

 private:
  void connect() {
    conn_ = connectPostgres(url_, password_).release();
    names_.clear();
    runSetup();
  }

  // The session's setup; a failing one drops the session again.
  void runSetup() {
    if (!setup_) return;
    try {
      setup_(*this);
    } catch (...) {
      PQfinish(conn_);
      conn_ = nullptr;
      names_.clear();
      throw;
    }
  }

  // Re-opens a lost connection between transactions; inside one, refuses.
  void ensureUsable(const std::string& what) {
    if (lostInTransaction_)
      throw SqlError("PostgreSQL " + url_ +
                         ": the connection was lost in this transaction; "
                         "not running '" +
                         what + "'",
                     true);
    if (conn_ && PQstatus(conn_) == CONNECTION_OK) return;
    if (inTransaction()) {
      lostInTransaction_ = true;
      throw SqlError("PostgreSQL " + url_ + ": connection lost", true);
    }
    if (conn_) PQfinish(conn_);
    conn_ = nullptr;
    connect();
  }

  void checkResult(PGresult* r, const std::string& what) {
    ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return;
    const char* code = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    std::string state = code ? code : "";
    std::string msg = r ? PQresultErrorMessage(r) : PQerrorMessage(conn_);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    bool lost = PQstatus(conn_) != CONNECTION_OK;
    if (lost && inTransaction()) lostInTransaction_ = true;
    throw SqlError("PostgreSQL " + url_ + ": " + what + ": " + msg +
                       (state.empty() ? "" : " (SQLSTATE " + state + ")"),
                   lost || transientState(state));
  }

  std::string url_, password_;
  PGconn* conn_ = nullptr;
  std::function<void(SqlConnection&)> setup_;
  struct Prepared {
    std::string name;  ///< the server-side statement
    int params = 0;
  };
  std::unordered_map<std::string, Prepared> names_;  ///< by SQL text
  int64_t changes_ = 0;
  bool lostInTransaction_ = false;
};

bool PostgresStmt::step() {
  if (!res_) {
    if (static_cast<int>(values_.size()) != params_)
      throw SqlError("'" + sql_ + "' has " + std::to_string(params_) +
                         " parameters, " + std::to_string(values_.size()) +
                         " bound",
                     false);
    res_ = c_.run(sql_, values_);
    row_ = 0;
  } else {
    ++row_;
  }
  return row_ < PQntuples(res_.get());
}

std::string PostgresStmt::getBlob(int col) const {
  check(col);
  if (PQgetisnull(res_.get(), row_, col)) return "";
  // BYTEA's text form (hex, or the old escape format): libpq decodes both.
  size_t n = 0;
  auto* text =
      reinterpret_cast<const unsigned char*>(PQgetvalue(res_.get(), row_, col));
  unsigned char* bytes = PQunescapeBytea(text, &n);
  if (!bytes)
    throw SqlError("column " + std::to_string(col) + " of '" + sql_ +
                       "' is not BYTEA (or memory ran out)",
                   false);
  std::string out(reinterpret_cast<const char*>(bytes), n);
  PQfreemem(bytes);
  return out;
}

int64_t PostgresStmt::getInt(int col) const {
  check(col);
  if (PQgetisnull(res_.get(), row_, col)) return 0;
  const char* v = PQgetvalue(res_.get(), row_, col);
  if (v[0] == 't' && v[1] == 0) return 1;
  if (v[0] == 'f' && v[1] == 0) return 0;
  errno = 0;
  char* end = nullptr;
  long long n = std::strtoll(v, &end, 10);
  if (errno != 0 || end == v || (*end != 0 && *end != '.'))
    throw SqlError("column " + std::to_string(col) + " of '" + sql_ +
                       "' is not an integer: '" + v + "'",
                   false);
  return n;
}

}  // namespace

void checkDatabaseUrl(const std::string& url) {
  if (url.empty()) return;
  if (!url.starts_with("postgresql://") && !url.starts_with("postgres://"))
    throw SqlError("database URL '" + url +
                       "' is not a PostgreSQL URL (postgresql://user@host:"
                       "port/database)",
                   false);
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(url.c_str(), &err);
  if (!opts) {
    std::string msg = err ? err : "cannot parse it";
    PQfreemem(err);
    throw SqlError("database URL: " + msg, false);
  }
  bool hasPassword = false;
  for (auto* o = opts; o->keyword; ++o)
    if (std::string_view(o->keyword) == "password" && o->val && *o->val)
      hasPassword = true;
  PQconninfoFree(opts);
  if (hasPassword)
    throw SqlError(
        "database URL holds a password: take it out of the URL and put it "
        "in a PGPASSFILE (host:port:database:user:password) or a password "
        "file option",
        false);
}

PgConn connectPostgres(
    const std::string& url, const std::string& password,
    const std::vector<std::pair<const char*, const char*>>& extra) {
  std::vector<const char*> keys = {"dbname", "connect_timeout",
                                   "application_name"};
  std::vector<const char*> vals = {url.c_str(), "10", "kiln"};
  if (!password.empty()) {
    keys.push_back("password");
    vals.push_back(password.c_str());
  }
  for (auto& [k, v] : extra) {
    keys.push_back(k);
    vals.push_back(v);
  }
  keys.push_back(nullptr);
  vals.push_back(nullptr);
  PgConn conn(PQconnectdbParams(keys.data(), vals.data(), 1));
  if (!conn) throw SqlError("PostgreSQL " + url + ": out of memory", true);
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn.get());
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    throw SqlError("cannot connect to PostgreSQL " + url + ": " + msg, true);
  }
  PQsetNoticeProcessor(
      conn.get(), [](void*, const char*) {}, nullptr);
  return conn;
}

std::string readPostgresPassword(const std::string& passwordFile) {
  if (passwordFile.empty()) return "";
  std::string text = readFile(passwordFile);
  std::string password = text.substr(0, text.find('\n'));
  if (password.empty())
    throw SqlError("password file " + passwordFile + " is empty", false);
  return password;
}

std::unique_ptr<SqlConnection> openPostgresConnection(
    const std::string& url, const std::string& passwordFile) {
  if (url.empty()) throw SqlError("no PostgreSQL URL", false);
  checkDatabaseUrl(url);
  return std::make_unique<PostgresConnection>(
      url, readPostgresPassword(passwordFile));
}

}  // namespace kiln::scheduler
