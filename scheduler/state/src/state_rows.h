#pragma once
// Column lists and row readers (state_rows.cc) shared by StateDb
// (state_db.cc, state_db_steps.cc) and the read model's queries
// (state_queries.cc), so each reads a row the same way.

#include <optional>
#include <string>
#include <vector>

#include "kiln/common/sqlite.h"  // SqliteMigration
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler::detail {

/// The state database's migrations, oldest first (state_schema.cc); the
/// last one's version is StateDb::schemaVersion().
const std::vector<SqliteMigration>& stateMigrations();
/// PostgreSQL's whole schema at kPostgresBaselineVersion (state_schema.cc).
const char* postgresBaseline();
inline constexpr int64_t kPostgresBaselineVersion = 8;
/// A PostgreSQL step past the baseline: version N from N-1.
struct PostgresMigration {
  int64_t version;
  const char* sql;
};
/// PostgreSQL's steps past the baseline, in order; each version has its
/// SQLite step in stateMigrations() too.
const std::vector<PostgresMigration>& postgresMigrations();
/// Brings `db` to StateDb::schemaVersion() in one transaction (serialized
/// between hosts on PostgreSQL), returning the version it had. Unless
/// `upgrade`, only an empty PostgreSQL database is migrated. Throws
/// SchemaError for a newer schema or (PostgreSQL, !upgrade) an older one.
int64_t migrateState(SqlConnection& db, bool upgrade);

/// Columns of `jobsets` in the order readJobset expects.
extern const char* const kJobsetColumns;
/// Columns of `builds` in the order readBuild expects.
extern const char* const kBuildColumns;
/// Columns of `steps` in the order readStep expects.
extern const char* const kStepColumns;
/// As many NULLs as kStepColumns has columns (the other half of a UNION).
extern const char* const kStepNulls;

/// The row under `s` (selected with the matching column list).
JobsetRow readJobset(const SqlStmt& s);
BuildRow readBuild(const SqlStmt& s);
/// The build whose kBuildColumns start at column `first`; nullopt when its
/// id is NULL (the missing side of an outer join).
std::optional<BuildRow> readBuildAt(const SqlStmt& s, int first);
/// kBuildColumns, each prefixed with `alias` and a dot.
std::string buildColumnsOf(const std::string& alias);
/// How many columns kBuildColumns has.
inline constexpr int kBuildColumnCount = 17;
StepRow readStep(const SqlStmt& s);
/// `id, jobset, inputs_hash, time, duration, jobs, error`.
EvaluationRow readEval(const SqlStmt& s);

/// A word list as stored (space-separated) and back.
std::string joinWords(const std::vector<std::string>& v);
std::vector<std::string> splitWords(const std::string& s);

/// Runs the INSERT … RETURNING id under `s`; the new row's id.
inline int64_t insertedId(SqlStmt& s) {
  if (!s.step()) throw Error("an INSERT … RETURNING id returned no row");
  int64_t id = s.getInt(0);
  s.reset();
  return id;
}

/// Every row `s` gives, each read with `read`.
template <class Row, class Read>
std::vector<Row> readAll(SqlStmt& s, Read read) {
  std::vector<Row> out;
  while (s.step()) out.push_back(read(s));
  return out;
}

/// The first row `s` gives, or nullopt.
template <class Row, class Read>
std::optional<Row> readOne(SqlStmt& s, Read read) {
  if (!s.step()) return std::nullopt;
  return read(s);
}

/// Statements over many rows take them in chunks of these sizes, largest
/// first, so that a connection prepares at most five texts of each such
/// statement (each PostgreSQL connection keeps every text it prepared) and
/// 256 rows of 16 parameters stay under both backends' limits (SQLite:
/// 32,766).
inline constexpr size_t kChunkSizes[] = {256, 64, 16, 4, 1};

/// Calls fn(first, count) for consecutive chunks (kChunkSizes) covering
/// [0, n).
template <class Fn>
void forEachChunk(size_t n, Fn fn) {
  for (size_t at = 0; at < n;) {
    size_t count = 1;
    for (size_t c : kChunkSizes)
      if (n - at >= c) {
        count = c;
        break;
      }
    fn(at, count);
    at += count;
  }
}

/// "(?, ?, ...)" with `n` placeholders, `rows` times, comma-separated.
std::string placeholderRows(size_t rows, size_t n);

}  // namespace kiln::scheduler::detail
