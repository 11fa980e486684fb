#pragma once
// Column lists and row readers (state_rows.cc) shared by StateDb
// (state_db.cc, state_db_steps.cc) and the read model's queries
// (state_queries.cc), so each reads a row the same way.

#include <optional>
#include <string>
#include <vector>

#include "kiln/common/sqlite.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler::detail {

/// The state database's migrations, oldest first (state_schema.cc); the
/// last one's version is StateDb::schemaVersion().
const std::vector<SqliteMigration>& stateMigrations();

/// Columns of `jobsets` in the order readJobset expects.
extern const char* const kJobsetColumns;
/// Columns of `builds` in the order readBuild expects.
extern const char* const kBuildColumns;
/// Columns of `steps` in the order readStep expects.
extern const char* const kStepColumns;

/// The row under `s` (selected with the matching column list).
JobsetRow readJobset(const SqliteStmt& s);
BuildRow readBuild(const SqliteStmt& s);
/// The build whose kBuildColumns start at column `first`; nullopt when its
/// id is NULL (the missing side of an outer join).
std::optional<BuildRow> readBuildAt(const SqliteStmt& s, int first);
/// kBuildColumns, each prefixed with `alias` and a dot.
std::string buildColumnsOf(const std::string& alias);
/// How many columns kBuildColumns has.
inline constexpr int kBuildColumnCount = 17;
StepRow readStep(const SqliteStmt& s);
/// `id, jobset, inputs_hash, time, duration, jobs, error`.
EvaluationRow readEval(const SqliteStmt& s);

/// A word list as stored (space-separated) and back.
std::string joinWords(const std::vector<std::string>& v);
std::vector<std::string> splitWords(const std::string& s);

/// Every row `s` gives, each read with `read`.
template <class Row, class Read>
std::vector<Row> readAll(SqliteStmt& s, Read read) {
  std::vector<Row> out;
  while (s.step()) out.push_back(read(s));
  return out;
}

/// The first row `s` gives, or nullopt.
template <class Row, class Read>
std::optional<Row> readOne(SqliteStmt& s, Read read) {
  if (!s.step()) return std::nullopt;
  return read(s);
}

}  // namespace kiln::scheduler::detail
