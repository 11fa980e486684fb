// `kiln db copy`: every table of one state database into another, ids
// kept, in pages read from a snapshot of the source and multi-row INSERTs
// into one transaction on the target (state_copy.h). The tables and their
// columns are listed here; the source's column counts are checked against
// the list, so a migration that adds a column must add it here too. On a
// PostgreSQL target the trigger that counts builds into eval_counts is off
// while copying (the table is copied instead): with it on, the builds
// took twice as long.
#include "kiln/scheduler/state_copy.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "kiln/common/file.h"
#include "state_rows.h"

namespace kiln::scheduler {
namespace {

constexpr size_t kPageRows = 5000;  // rows read per SELECT
constexpr size_t kPostgresRowsPerInsert = 500;
constexpr int64_t kProgressRows = 50000;

// A column's type as copied.
enum class Kind { kInt, kText, kBlob };

// A table as copied: its integer columns, then its text columns, then its
// byte columns (the order of the SELECT and the INSERT), the column pages
// are cut at (the leading column of an index; not necessarily unique), and
// the rows per page (fewer for tables of large rows: logs).
struct TableSpec {
  std::string name;
  std::string key;
  std::vector<std::string> ints;
  std::vector<std::string> texts;
  std::string onConflict;  // appended to the INSERT
  std::vector<std::string> blobs = {};
  size_t pageRows = kPageRows;

  size_t cols() const { return ints.size() + texts.size() + blobs.size(); }
  Kind kind(size_t col) const {
    return col < ints.size()                  ? Kind::kInt
           : col < ints.size() + texts.size() ? Kind::kText
                                              : Kind::kBlob;
  }
  Kind keyKind() const {
    return std::find(texts.begin(), texts.end(), key) != texts.end()
               ? Kind::kText
               : Kind::kInt;
  }
  bool hasId() const { return key == "id"; }
  std::string columnList() const {
    std::string out;
    for (auto* v : {&ints, &texts, &blobs})
      for (auto& c : *v) out += (out.empty() ? "" : ", ") + c;
    return out;
  }
};

// Every table, parents before children (foreign keys). eval_counts comes
// last and is copied as it is, over what the target's trigger counted
// while the builds arrived (when it could not be paused); the whole table
// is compared afterwards.
const std::vector<TableSpec>& tables() {
  static const std::vector<TableSpec> t = {
      {"projects", "id", {"id", "enabled"}, {"name", "description"}, ""},
      {"jobsets",
       "id",
       {"id", "project", "check_interval", "shares", "enabled", "last_checked",
        "max_closure_growth", "max_build_time_growth", "repeat_ppm"},
       {"name", "kind", "location", "branch", "file", "attribute", "arguments",
        "last_inputs", "evaluator", "channel_job"},
       ""},
      {"evaluations",
       "id",
       {"id", "jobset", "time", "duration", "jobs"},
       {"inputs_hash", "error"},
       ""},
      {"eval_errors", "eval", {"eval"}, {"attr", "error"}, ""},
      {"builds",
       "id",
       {"id", "eval", "jobset", "finished", "status", "global_priority",
        "local_priority", "created", "stop_time", "reused_from", "max_silent",
        "timeout"},
       {"job", "nix_name", "system", "drv_path", "error"},
       ""},
      {"build_outputs", "build", {"build"}, {"name", "path"}, ""},
      // Release engineering (migration 15).
      {"aggregate_constituents",
       "aggregate",
       {"aggregate", "constituent"},
       {},
       ""},
      {"channel_advances",
       "id",
       {"id", "jobset", "eval", "build", "time"},
       {},
       ""},
      {"eval_sources", "eval", {"eval"}, {"path"}, ""},
      // Expected finishes recorded (migration 17).
      {"eval_estimates", "eval", {"eval", "made", "estimated"}, {}, ""},
      {"eval_regressions",
       "eval",
       {"eval", "base_eval", "before_value", "after_value"},
       {"job", "kind"},
       ""},
      {"steps",
       "id",
       {"id", "finished", "status", "attempts", "created", "start_time",
        "stop_time", "peak_memory", "cpu_time_us", "build_dir_bytes"},
       {"drv_path", "system", "pname", "features", "error", "worker"},
       ""},
      {"step_deps", "step", {"step", "dep"}, {}, ""},
      // Reproducibility checks (migration 17; refused_by: 18), after the
      // steps they check.
      {"repeat_checks",
       "step",
       {"step", "jobset", "created", "finished"},
       {"state", "first_worker", "second_worker", "differing", "side_location",
        "report", "refused_by"},
       ""},
      // Build logs (migration 12): a page holds every attempt of a step.
      {"step_logs", "step", {"step", "attempt", "size"}, {}, "", {"body"}, 16},
      {"step_log_chunks",
       "step",
       {"step", "attempt", "pos"},
       {},
       "",
       {"data"},
       64},
      {"cached_failures",
       "drv_path",
       {"status", "time", "expires"},
       {"drv_path"},
       ""},
      {"requests", "id", {"id", "done", "ok"}, {"kind", "args", "result"}, ""},
      {"notifications",
       "id",
       {"id", "created", "attempts", "next_attempt", "delivered"},
       {"target", "ordering_key", "event", "payload", "last_error"},
       ""},
      {"api_tokens",
       "id",
       {"id", "created", "revoked"},
       {"key_id", "name", "scope", "salt", "hash"},
       ""},
      {"scheduler_snapshot", "id", {"id", "taken"}, {"body"}, ""},
      // Pins of the binary cache's garbage collection (migration 14).
      {"cache_pins", "name", {"created"}, {"name", "path"}, ""},
      {"eval_claims",
       "jobset",
       {"jobset", "request", "force", "claimed", "lease_until"},
       {"evaluator"},
       ""},
      {"eval_results",
       "id",
       {"id", "jobset", "request", "created", "chunks", "bytes"},
       {"evaluator"},
       ""},
      {"eval_result_chunks", "result", {"result", "seq"}, {"data"}, ""},
      // Continuous integration through the forges (migration 16).
      {"forge_webhooks", "project", {"project"}, {"secret_file"}, ""},
      {"forge_deliveries", "forge", {"received"}, {"forge", "delivery"}, ""},
      {"forge_jobsets",
       "jobset",
       {"jobset", "number", "base_jobset", "closed", "swept"},
       {"forge", "repo", "head"},
       ""},
      {"eval_counts",
       "eval",
       {"eval", "builds", "finished", "succeeded"},
       {},
       " ON CONFLICT (eval) DO UPDATE SET builds = excluded.builds, "
       "finished = excluded.finished, succeeded = excluded.succeeded"},
  };
  return t;
}

// One column's value.
struct Value {
  bool null = false;
  int64_t i = 0;
  std::string s;
  bool operator==(const Value&) const = default;
};

Value readValue(const SqlStmt& s, int col, Kind kind) {
  Value v;
  if (s.isNull(col))
    v.null = true;
  else if (kind == Kind::kText)
    v.s = s.getStr(col);
  else if (kind == Kind::kBlob)
    v.s = s.getBlob(col);
  else
    v.i = s.getInt(col);
  return v;
}

void bindValue(SqlStmt& s, const Value& v, Kind kind) {
  if (v.null)
    s.bindNull();
  else if (kind == Kind::kText)
    s.bind(std::string_view(v.s));
  else if (kind == Kind::kBlob)
    s.bindBlob(v.s);
  else
    s.bind(v.i);
}

// Reads a table in pages of about kPageRows rows ordered by its key: each
// page ends at the key of its kPageRows-th row and takes every row with
// that key, so a key that is not unique never straddles two pages.
class PageReader {
 public:
  PageReader(SqlConnection& db, const TableSpec& t) : db_(db), t_(t) {}

  // Replaces `rows` with the next page's values, row after row; returns
  // how many rows it has (0 at the end).
  size_t next(std::vector<Value>& rows) {
    rows.clear();
    if (done_) return 0;
    std::string from = " FROM " + t_.name;
    std::string after = after_ ? " WHERE " + t_.key + " > ?" : "";
    auto bound =
        db_.prepare("SELECT " + t_.key + from + after + " ORDER BY " + t_.key +
                    " LIMIT 1 OFFSET " + std::to_string(t_.pageRows - 1));
    if (after_) bindValue(bound, *after_, t_.keyKind());
    std::optional<Value> upto;
    if (bound.step()) upto = readValue(bound, 0, t_.keyKind());
    std::string upper =
        upto ? (after_ ? " AND " : " WHERE ") + t_.key + " <= ?" : "";
    auto s = db_.prepare("SELECT " + t_.columnList() + from + after + upper +
                         " ORDER BY " + t_.key);
    if (after_) bindValue(s, *after_, t_.keyKind());
    if (upto) bindValue(s, *upto, t_.keyKind());
    while (s.step())
      for (size_t c = 0; c < t_.cols(); ++c)
        rows.push_back(readValue(s, static_cast<int>(c), t_.kind(c)));
    done_ = !upto;
    after_ = std::move(upto);
    return rows.size() / t_.cols();
  }

 private:
  SqlConnection& db_;
  const TableSpec& t_;
  std::optional<Value> after_;  // the last page's last key
  bool done_ = false;
};

// Inserts rows into a table: on PostgreSQL kPostgresRowsPerInsert rows
// per statement (one round trip), on SQLite one row per prepared
// statement (in-process, and SQLite's parameter limit is low).
class TableWriter {
 public:
  TableWriter(SqlConnection& db, const TableSpec& t)
      : db_(db),
        t_(t),
        perInsert_(db.dialect() == SqlDialect::kPostgres
                       ? std::min(kPostgresRowsPerInsert, t.pageRows)
                       : 1) {}

  // Queues the rows of `page` (moved from), inserting every full batch.
  void add(std::vector<Value>& page) {
    for (auto& v : page) queued_.push_back(std::move(v));
    size_t batch = perInsert_ * t_.cols(), done = 0;
    for (; queued_.size() - done >= batch; done += batch)
      insert(done, perInsert_);
    queued_.erase(queued_.begin(), queued_.begin() + done);
  }
  // Inserts what is queued.
  void flush() {
    if (!queued_.empty()) insert(0, queued_.size() / t_.cols());
    queued_.clear();
  }

 private:
  void insert(size_t first, size_t rows) {
    auto it = stmts_.find(rows);
    if (it == stmts_.end())
      it = stmts_.emplace(rows, db_.prepare(insertSql(rows))).first;
    SqlStmt& s = it->second;
    for (size_t k = 0; k < rows * t_.cols(); ++k)
      bindValue(s, queued_[first + k], t_.kind(k % t_.cols()));
    s.exec();
  }
  std::string insertSql(size_t rows) const {
    std::string one = "(";
    for (size_t c = 0; c < t_.cols(); ++c)
      one += std::string(c ? ", " : "") +
             (t_.kind(c) == Kind::kBlob ? blobParam(db_.dialect()) : "?");
    one += ")";
    std::string sql =
        "INSERT INTO " + t_.name + " (" + t_.columnList() + ") VALUES " + one;
    for (size_t r = 1; r < rows; ++r) sql += ", " + one;
    return sql + t_.onConflict;
  }

  SqlConnection& db_;
  const TableSpec& t_;
  size_t perInsert_;
  std::vector<Value> queued_;
  std::map<size_t, SqlStmt> stmts_;  // by rows per statement
};

// `msg` without the parameter list of a multi-row INSERT it quotes.
std::string shortened(std::string msg) {
  size_t values = msg.find(" VALUES (?");
  size_t end = values == std::string::npos ? values : msg.find('\'', values);
  if (end != std::string::npos)
    msg.replace(values, end - values, " VALUES (…), …");
  return msg;
}

// Runs `fn`, naming `table` in the message of an error it throws.
template <class Fn>
auto inTable(const std::string& table, Fn fn) {
  std::string ctx = "copying table " + table + ": ";
  try {
    return fn();
  } catch (const SqlError& e) {
    throw SqlError(ctx + shortened(e.what()), e.transient());
  } catch (const SchedulerStateError& e) {
    throw SchedulerStateError(ctx + shortened(e.what()));
  }
}

int64_t copyTable(SqlConnection& src, SqlConnection& dst, const TableSpec& t,
                  const CopyProgress& progress) {
  return inTable(t.name, [&] {
    PageReader reader(src, t);
    TableWriter writer(dst, t);
    std::vector<Value> page;
    int64_t rows = 0, reported = 0;
    while (size_t n = reader.next(page)) {
      writer.add(page);
      rows += static_cast<int64_t>(n);
      if (progress && rows - reported >= kProgressRows) {
        progress(t.name, rows);
        reported = rows;
      }
    }
    writer.flush();
    dst.changes();  // reads what was pipelined: a failure names this table
    if (progress) progress(t.name, rows);
    return rows;
  });
}

// A read transaction on the source for the whole copy: one snapshot.
class ReadSnapshot {
 public:
  explicit ReadSnapshot(SqlConnection& db) : db_(db) {
    db_.exec(db_.dialect() == SqlDialect::kPostgres
                 ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
                 : "BEGIN");
  }
  ~ReadSnapshot() {
    try {
      db_.exec("ROLLBACK");
    } catch (const Error&) {
      // A lost connection has ended it already.
    }
  }
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;

 private:
  SqlConnection& db_;
};

// Throws SchemaError unless the source is at this kiln's schema, with the
// columns this file copies.
void requireCurrentSource(SqlConnection& src, const DatabaseSpec& from) {
  int64_t v = src.userVersion(), latest = StateDb::schemaVersion();
  std::string what = "source " + from.describe() + " has schema version " +
                     std::to_string(v) + ", this kiln copies version " +
                     std::to_string(latest);
  if (v > latest) throw SchemaError(what + ": use a newer kiln");
  if (v < latest)
    throw SchemaError(what + ": run `kiln db migrate " +
                      (from.isPostgres()
                           ? "--database " + from.url
                           : "--state-dir " + dirNameOf(from.sqlitePath)) +
                      "` on it first");
  for (auto& t : tables()) {
    auto s = src.prepare("SELECT * FROM " + t.name + " LIMIT 0");
    s.step();
    if (s.columnCount() != static_cast<int>(t.cols()))
      throw SchemaError("table " + t.name + " of " + from.describe() + " has " +
                        std::to_string(s.columnCount()) +
                        " columns, kiln db copy knows " +
                        std::to_string(t.cols()));
  }
}

// Throws SchedulerStateError naming the first table of `dst` with rows.
void requireEmpty(SqlConnection& dst) {
  for (auto& t : tables()) {
    auto s = dst.prepare("SELECT 1 FROM " + t.name + " LIMIT 1");
    if (s.step())
      throw SchedulerStateError(
          "target " + dst.describe() + " is not empty: table " + t.name +
          " has rows; kiln db copy fills only an empty database, so that "
          "nothing stored there is lost (nothing was changed)");
  }
}

// On PostgreSQL, turns off the triggers that count builds into
// eval_counts (they cost more than the INSERT itself) until resumeCounting;
// eval_counts is copied anyway. Only the tables' owner may: for anyone
// else the triggers keep counting. Returns whether they were turned off.
bool pauseCounting(SqlConnection& dst) {
  if (dst.dialect() != SqlDialect::kPostgres) return false;
  try {
    SqlConnection::Txn savepoint(dst);
    dst.exec("ALTER TABLE builds DISABLE TRIGGER builds_count");
    dst.exec("ALTER TABLE builds DISABLE TRIGGER builds_count_inserted");
    savepoint.commit();
    return true;
  } catch (const SqlError&) {
    return false;
  }
}

void resumeCounting(SqlConnection& dst) {
  dst.exec("ALTER TABLE builds ENABLE TRIGGER builds_count");
  dst.exec("ALTER TABLE builds ENABLE TRIGGER builds_count_inserted");
}

// Fresh planner statistics after the copy, so the first pages are not
// slow; without them autovacuum gathers them soon, so a failure is fine.
void analyze(SqlConnection& dst) {
  try {
    dst.exec("ANALYZE");
  } catch (const SqlError&) {
  }
}

// Sets each identity sequence so the next id is past the copied ones.
void moveSequences(SqlConnection& dst) {
  for (auto& t : tables())
    if (t.hasId())
      dst.exec("SELECT setval(pg_get_serial_sequence('" + t.name +
               "', 'id'), coalesce(max(id), 0) + 1, false) FROM " + t.name);
}

struct TableStats {
  int64_t rows = 0;
  int64_t maxId = 0;
  bool operator==(const TableStats&) const = default;
};

TableStats tableStats(SqlConnection& db, const TableSpec& t) {
  auto s = db.prepare("SELECT count(*), " +
                      std::string(t.hasId() ? "coalesce(max(id), 0)" : "0") +
                      " FROM " + t.name);
  if (!s.step()) return {};
  return {s.getInt(0), s.getInt(1)};
}

// Throws SchedulerStateError unless `dst`'s eval_counts equal `src`'s.
void compareEvalCounts(SqlConnection& src, SqlConnection& dst) {
  const TableSpec& t = tables().back();
  PageReader a(src, t), b(dst, t);
  std::vector<Value> pa, pb;
  while (true) {
    size_t na = a.next(pa), nb = b.next(pb);
    if (pa != pb) {
      size_t k = 0;
      while (k < pa.size() && k < pb.size() && pa[k] == pb[k]) ++k;
      k -= k % t.cols();
      int64_t eval = k < pa.size() ? pa[k].i : pb[k].i;
      throw SchedulerStateError(
          "after the copy, eval_counts of evaluation " + std::to_string(eval) +
          " differ between source and target (nothing was changed)");
    }
    if (na == 0 && nb == 0) return;
  }
}

// Compares each table's rows and largest id between both sides, and the
// rows copied; throws SchedulerStateError at the first difference.
void verify(SqlConnection& src, SqlConnection& dst, const CopyReport& r) {
  for (size_t k = 0; k < tables().size(); ++k) {
    const TableSpec& t = tables()[k];
    TableStats a = tableStats(src, t), b = tableStats(dst, t);
    if (a == b && a.rows == r.tables[k].second) continue;
    throw SchedulerStateError(
        "after the copy, table " + t.name + " has " + std::to_string(a.rows) +
        " rows (largest id " + std::to_string(a.maxId) + ") in the source, " +
        std::to_string(b.rows) + " (largest id " + std::to_string(b.maxId) +
        ") in the target, " + std::to_string(r.tables[k].second) +
        " copied (nothing was changed)");
  }
  compareEvalCounts(src, dst);
}

std::unique_ptr<SqlConnection> openSource(const DatabaseSpec& from,
                                          const DatabaseSpec& to) {
  if (!from.isPostgres() && !pathExists(from.sqlitePath))
    throw SchedulerStateError("no state database at " + from.sqlitePath);
  bool same = from.isPostgres()
                  ? from.url == to.url
                  : !to.isPostgres() &&
                        absPath(from.sqlitePath) == absPath(to.sqlitePath);
  if (same)
    throw SchedulerStateError("source and target are the same database, " +
                              from.describe());
  return from.connect(SqlAccess::kRead);
}

CopyReport copyAll(const DatabaseSpec& from, const DatabaseSpec& to,
                   const CopyProgress& progress, const Clock& clock) {
  auto start = clock.now();
  auto src = openSource(from, to);
  ReadSnapshot snapshot(*src);
  requireCurrentSource(*src, from);
  auto dst = to.connect(SqlAccess::kCreate);
  CopyReport r;
  {
    SqlConnection::Txn txn(*dst);
    detail::migrateState(*dst, true);
    // Migration 7 defers SQLite's foreign key checks to the commit: a row
    // that breaks one is to fail where it is inserted, naming its table.
    if (dst->dialect() == SqlDialect::kSqlite)
      dst->exec("PRAGMA defer_foreign_keys = OFF");
    requireEmpty(*dst);
    bool paused = pauseCounting(*dst);
    for (auto& t : tables()) {
      int64_t n = copyTable(*src, *dst, t, progress);
      r.tables.emplace_back(t.name, n);
      r.rows += n;
    }
    if (paused) resumeCounting(*dst);
    if (dst->dialect() == SqlDialect::kPostgres) moveSequences(*dst);
    verify(*src, *dst, r);
    txn.commit();
  }
  if (dst->dialect() == SqlDialect::kPostgres) analyze(*dst);
  r.seconds = std::chrono::duration<double>(clock.now() - start).count();
  return r;
}

}  // namespace

CopyReport copyState(const DatabaseSpec& from, const DatabaseSpec& to,
                     const CopyProgress& progress, const Clock& clock) {
  bool created = !to.isPostgres() && !pathExists(to.sqlitePath);
  try {
    return copyAll(from, to, progress, clock);
  } catch (...) {
    if (created)
      for (auto suffix : {"", "-wal", "-shm", "-journal"})
        deletePath(to.sqlitePath + suffix);
    throw;
  }
}

}  // namespace kiln::scheduler
