// The PostgreSQL backend of sql.h, over libpq. Statements are prepared once
// per connection (named server-side statements, `?` rewritten to `$n`) and
// run with text parameters (binary for bytes: bindBlob) and text results
// (BYTEA's text form is decoded by getBlob). A connection lost outside a
// transaction is re-opened on the next call; lost inside one, every call
// fails (transient) until the transaction ends, so no statement of it runs
// on a fresh connection outside it.
//
// Inside a transaction the statements whose results nobody reads (BEGIN,
// SAVEPOINT, writes run by SqlStmt::exec) go out in libpq's pipeline mode
// without waiting; their results are read, in order, before the next
// statement whose rows are wanted, at RELEASE SAVEPOINT, at COMMIT and
// every kMaxQueued statements. A transaction of writes then costs one
// round trip instead of one per statement, and a failing write is
// reported by the commit of its innermost transaction at the latest.
//
// The connection is non-blocking: every wait for the server is a poll()
// bounded by the query timeout (pg_wait.h), past which the statement is
// cancelled and the connection dropped as if it were lost.
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/common/file.h"
#include "kiln/scheduler/sql.h"
#include "pg_connect.h"
#include "pg_wait.h"
#include "postgres_text.h"
#include "sql_postgres_stmt.h"

namespace kiln::scheduler {
namespace {

using detail::awaitResult;
using detail::cancelInBackground;
using detail::numberPlaceholders;
using detail::PgParam;
using detail::PgResult;
using detail::PgRunner;
using detail::PostgresStmt;
using detail::transientState;
using Result = PgResult;
using Param = PgParam;

class PostgresConnection : public SqlConnection, public PgRunner {
  struct Statement {
    std::string name;      ///< the server-side statement
    std::string numbered;  ///< the text with `$n` placeholders
    int params = 0;
    bool eachRun = false;  ///< planned at each run, never prepared
  };

 public:
  PostgresConnection(std::string url, std::string password,
                     std::chrono::milliseconds timeout)
      : url_(std::move(url)),
        password_(std::move(password)),
        timeout_(timeout) {
    connect();
  }
  ~PostgresConnection() override {
    if (conn_) PQfinish(conn_);
  }

  SqlDialect dialect() const override { return SqlDialect::kPostgres; }
  const std::string& describe() const override { return url_; }

  SqlStmt prepare(std::string_view sql) override {
    return prepareAs(sql, false);
  }
  SqlStmt prepareEachRun(std::string_view sql) override {
    return prepareAs(sql, true);
  }

  void exec(std::string_view sql) override {
    std::string text(sql);
    if (text == "BEGIN" || text.starts_with("SAVEPOINT ")) {
      sendCommand(text);  // opens the pipeline
      return;
    }
    if (pipeline_) {
      if (text.starts_with("RELEASE SAVEPOINT ")) {
        sendCommand(text);
        readQueued();  // the savepoint's writes succeeded, or it throws
        return;
      }
      if (text == "COMMIT") {
        sendCommand(text);
        leavePipeline();
        return;
      }
      if (text.starts_with("ROLLBACK")) {
        abortPipeline();  // what is queued is undone anyway
      } else {
        leavePipeline();
      }
    }
    ensureUsable(text);
    std::string what = "executing '" + text + "'";
    if (!PQsendQuery(conn_, text.c_str())) failSend(what);
    Result r = lastResult(what);
    checkResult(r.get(), what);
    const char* n = PQcmdTuples(r.get());
    changes_ = n && *n ? std::strtoll(n, nullptr, 10) : 0;
  }

  // No round trip: what arrived unasked on an idle connection is read
  // (the server's FATAL before it closes, then the end of the stream).
  bool sessionEnded() override {
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK) return true;
    if (pipeline_ || inTransaction()) return false;  // in use: not idle
    for (int reads = 0; reads < 4; ++reads) {
      pollfd p{PQsocket(conn_), POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) break;
      if (!PQconsumeInput(conn_)) return true;  // closed
    }
    while (PGnotify* n = PQnotifies(conn_)) PQfreemem(n);
    return PQstatus(conn_) != CONNECTION_OK;
  }

  void setQueryTimeout(std::chrono::milliseconds timeout) override {
    timeout_ = timeout;
  }
  std::chrono::milliseconds queryTimeout() const override { return timeout_; }

  void notify(std::string_view channel) override {
    prepare("SELECT pg_notify(?, '')").bind(channel).exec();
  }

  int64_t changes() override {
    if (pipeline_) readQueued();
    return changes_;
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

  /// Runs `sql` (prepared by prepare()) with `values` and returns its
  /// result (for PostgresStmt::step): in the pipeline, after the results
  /// queued before it.
  Result run(const std::string& sql,
             const std::vector<Param>& values) override {
    if (pipeline_) {
      sendPrepared(sql, values);
      return readQueued(true);
    }
    ensureUsable(sql);
    const Statement& st = preparedOnServer(sql);
    std::string what = "running '" + sql + "'";
    sendStatement(st, values, what);
    Result r = lastResult(what);
    checkResult(r.get(), what);
    noteChanges(r.get());
    return r;
  }

  /// Runs `sql` with `values` when nobody reads its rows: inside a
  /// transaction it is queued in the pipeline (PostgresStmt::execute).
  void runWithoutRows(const std::string& sql,
                      const std::vector<Param>& values) override {
    if (!inTransaction()) {
      run(sql, values);
      return;
    }
    sendPrepared(sql, values);
    if (queued_.size() >= kMaxQueued) readQueued();
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
  /// Statements queued in the pipeline before their results are read:
  /// the server's replies to them must fit the socket's buffers.
  static constexpr size_t kMaxQueued = 128;

  // The arrays libpq takes for `values`.
  struct Params {
    explicit Params(const std::vector<Param>& values) {
      for (auto& x : values) {
        this->values.push_back(x.value ? x.value->data() : nullptr);
        lengths.push_back(x.value ? static_cast<int>(x.value->size()) : 0);
        formats.push_back(x.binary ? 1 : 0);
      }
    }
    int count() const { return static_cast<int>(values.size()); }
    std::vector<const char*> values;
    std::vector<int> lengths, formats;
  };

  SqlStmt prepareAs(std::string_view sql, bool eachRun) {
    std::string text(sql);
    auto it = statements_.find(text);
    if (it == statements_.end()) {
      Statement st;
      st.numbered = numberPlaceholders(sql, st.params);
      st.name = "k" + std::to_string(statements_.size() + 1);
      st.eachRun = eachRun;
      it = statements_.emplace(text, std::move(st)).first;
    }
    return SqlStmt(
        std::make_unique<PostgresStmt>(*this, text, it->second.params));
  }

  void noteChanges(PGresult* r) {
    const char* n = PQcmdTuples(r);
    if (n && *n) changes_ = std::strtoll(n, nullptr, 10);
  }

  // `sql`'s statement, prepared on this connection (again if it was
  // re-opened since): synchronously, or queued in the pipeline.
  const Statement& preparedOnServer(const std::string& sql) {
    const Statement& st = statements_.at(sql);
    if (st.eachRun || onServer_.count(st.name)) return st;
    if (pipeline_) {
      if (!PQsendPrepare(conn_, st.name.c_str(), st.numbered.c_str(), 0,
                         nullptr))
        failSend("preparing '" + sql + "'");
      queued_.push_back({"preparing '" + sql + "'", st.name});
    } else {
      std::string what = "preparing '" + sql + "'";
      if (!PQsendPrepare(conn_, st.name.c_str(), st.numbered.c_str(), 0,
                         nullptr))
        failSend(what);
      Result r = lastResult(what);
      checkResult(r.get(), what);
    }
    onServer_.insert(st.name);
    return st;
  }

  void enterPipeline() {
    if (pipeline_) return;
    if (PQenterPipelineMode(conn_) != 1) failSend("entering pipeline mode");
    pipeline_ = true;
  }

  // Queues `sql`, a command without parameters or rows.
  void sendCommand(const std::string& sql) {
    ensureUsable(sql);
    enterPipeline();
    if (!PQsendQueryParams(conn_, sql.c_str(), 0, nullptr, nullptr, nullptr,
                           nullptr, 0))
      failSend("sending '" + sql + "'");
    queued_.push_back({"executing '" + sql + "'", ""});
  }

  void sendPrepared(const std::string& sql, const std::vector<Param>& values) {
    ensureUsable(sql);
    enterPipeline();
    const Statement& st = preparedOnServer(sql);
    sendStatement(st, values, "sending '" + sql + "'");
    queued_.push_back({"running '" + sql + "'", ""});
  }

  // Sends `st` with `values` (prepared, or planned at this run).
  void sendStatement(const Statement& st, const std::vector<Param>& values,
                     const std::string& what) {
    Params p(values);
    if (!(st.eachRun ? PQsendQueryParams(conn_, st.numbered.c_str(), p.count(),
                                         nullptr, p.values.data(),
                                         p.lengths.data(), p.formats.data(), 0)
                     : PQsendQueryPrepared(conn_, st.name.c_str(), p.count(),
                                           p.values.data(), p.lengths.data(),
                                           p.formats.data(), 0)))
      failSend(what);
  }

  // The next result (NULL: the current statement's results are over),
  // within the query timeout; a failure or expiry drops the connection.
  Result nextResult(const std::string& what) {
    detail::PgWait wait = awaitResult(conn_, timeout_);
    if (wait == detail::PgWait::kReady) return Result(PQgetResult(conn_));
    std::string failed = what;  // `what` may be a queued statement's
    if (wait == detail::PgWait::kFailed) failSend(failed);
    cancelInBackground(conn_);
    dropConnection();
    throw SqlError("PostgreSQL " + url_ + ": " + failed +
                       ": no answer within " +
                       std::to_string(timeout_.count()) +
                       " ms (the query timeout); the connection was dropped",
                   true);
  }

  // A statement's results outside the pipeline, as PQexec returns them:
  // its first failure, else its last result.
  Result lastResult(const std::string& what) {
    Result last;
    while (Result r = nextResult(what)) {
      ExecStatusType st = PQresultStatus(r.get());
      if (last && PQresultStatus(last.get()) == PGRES_FATAL_ERROR) continue;
      last = std::move(r);
      if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH)
        break;  // never sent by kiln; PQexec stops there too
    }
    return last;
  }

  // Reads the queued results in order (returning the last one's when
  // `keepLast`); the first failure ends the pipeline and throws.
  Result readQueued(bool keepLast = false) {
    if (!PQsendFlushRequest(conn_)) failSend("flushing the pipeline");
    Result last;
    while (!queued_.empty()) {
      Result r = nextResult(queued_.front().what);
      ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
      if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        std::string what = queued_.front().what;
        abortPipeline();
        checkResult(r.get(), what);
        throw SqlError("PostgreSQL " + url_ + ": " + what + ": no result",
                       true);
      }
      while (Result more = nextResult(queued_.front().what)) {
      }  // the NULL that ends the statement's results
      noteChanges(r.get());
      queued_.pop_front();
      if (queued_.empty() && keepLast) last = std::move(r);
    }
    return last;
  }

  // Commits the pipeline's results: a sync, every result read, pipeline
  // mode left. Throws the first failure.
  void leavePipeline() {
    if (!pipeline_) return;
    readQueued();
    if (!PQpipelineSync(conn_)) failSend("syncing the pipeline");
    waitForSync();
  }

  // After a failure: the server skipped everything queued up to the sync.
  void abortPipeline() {
    if (!pipeline_) return;
    forgetQueued();
    if (PQstatus(conn_) == CONNECTION_OK && PQpipelineSync(conn_)) {
      waitForSync();
    } else {
      pipeline_ = false;  // the connection is re-opened (ensureUsable)
    }
  }

  void waitForSync() {
    while (PQstatus(conn_) == CONNECTION_OK) {
      Result r = nextResult("syncing the pipeline");
      if (r && PQresultStatus(r.get()) == PGRES_PIPELINE_SYNC) break;
    }
    PQexitPipelineMode(conn_);
    pipeline_ = false;
  }

  // Forgets the queued statements: the server skips what follows a
  // failure, a statement's preparation too.
  void forgetQueued() {
    for (auto& q : queued_)
      if (!q.prepares.empty()) onServer_.erase(q.prepares);
    queued_.clear();
  }

  [[noreturn]] void failSend(const std::string& what) {
    std::string msg = PQerrorMessage(conn_);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    dropConnection();
    throw SqlError("PostgreSQL " + url_ + ": " + what + ": " + msg, true);
  }

  // What the server did of the queued statements is unknown: the
  // connection is dropped (re-opened between transactions).
  void dropConnection() {
    PQfinish(conn_);
    conn_ = nullptr;
    if (inTransaction()) lostInTransaction_ = true;
    forgetQueued();
    pipeline_ = false;
  }

  void connect() {
    // Connecting waits as long as a statement may, within libpq's 2 s
    // minimum and connectPostgres's 10 s.
    auto s = std::chrono::ceil<std::chrono::seconds>(timeout_).count();
    std::string wait = std::to_string(
        timeout_.count() == 0 ? 10 : std::clamp<int64_t>(s, 2, 10));
    PgConn c =
        connectPostgres(url_, password_, {{"connect_timeout", wait.c_str()}});
    if (PQsetnonblocking(c.get(), 1) != 0)
      throw SqlError(
          "PostgreSQL " + url_ + ": cannot make the connection non-blocking",
          true);
    conn_ = c.release();
    onServer_.clear();
    queued_.clear();
    pipeline_ = false;
    runSetup();
  }

  // The session's setup; a failing one drops the session again.
  void runSetup() {
    if (!setup_) return;
    try {
      setup_(*this);
    } catch (...) {
      if (pipeline_) abortPipeline();
      PQfinish(conn_);
      conn_ = nullptr;
      onServer_.clear();
      queued_.clear();
      pipeline_ = false;
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
  std::chrono::milliseconds timeout_;  ///< per wait for the server; 0: none
  PGconn* conn_ = nullptr;
  std::function<void(SqlConnection&)> setup_;
  /// By SQL text: its server-side name, `$n` text and parameter count.
  std::unordered_map<std::string, Statement> statements_;
  /// The statements prepared on the current connection, by name.
  std::unordered_set<std::string> onServer_;
  bool pipeline_ = false;  ///< in libpq's pipeline mode
  /// A statement sent whose result is unread.
  struct Queued {
    std::string what;      ///< for messages
    std::string prepares;  ///< the statement it prepares, if it does
  };
  std::deque<Queued> queued_;
  int64_t changes_ = 0;
  bool lostInTransaction_ = false;
};

}  // namespace

std::unique_ptr<SqlConnection> openPostgresConnection(
    const std::string& url, const std::string& passwordFile,
    std::chrono::milliseconds queryTimeout) {
  if (url.empty()) throw SqlError("no PostgreSQL URL", false);
  checkDatabaseUrl(url);
  return std::make_unique<PostgresConnection>(
      url, readPostgresPassword(passwordFile), queryTimeout);
}

}  // namespace kiln::scheduler
