#pragma once
/// Copying a farm's whole state from one database to another (`kiln db
/// copy`): SQLite to PostgreSQL when a farm outgrows its file, PostgreSQL
/// to SQLite for a backup, or between two databases of one backend. Every
/// row keeps its id; the target ends up as a replica of the source at the
/// moment the copy began.

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// What copyState copied.
struct CopyReport {
  /// Each table copied, in the order it was copied (foreign keys first),
  /// with its row count; eval_counts (derived from the builds) is copied
  /// as the source has it and compared row by row.
  std::vector<std::pair<std::string, int64_t>> tables;
  int64_t rows = 0;    ///< the sum of the tables' rows
  double seconds = 0;  ///< wall time of the whole copy
};

/// Called while a table is copied with its rows copied so far: every
/// 50,000 rows, and once when the table is done (with its total, 0 for an
/// empty table).
using CopyProgress =
    std::function<void(const std::string& table, int64_t rows)>;

/// Copies every row of the state database `from` into `to`, keeping ids.
/// The source is read through a read-only connection in one read
/// transaction (a consistent snapshot, so a running scheduler may keep
/// writing it) and must be at StateDb::schemaVersion(). The target is
/// migrated to that version and must be empty; everything (migration
/// included) happens in one transaction on it, so a failure leaves it as
/// it was (a SQLite target file the copy created is removed again). On
/// PostgreSQL the id sequences are moved past the copied ids. Before
/// committing, each table's row count and largest id are compared between
/// both sides. Throws SchemaError (the source is not at the current schema,
/// or either side is newer than this kiln), SchedulerStateError (the
/// source is missing, the target is the source or holds rows, a row the
/// target cannot store such as non-UTF-8 text in PostgreSQL, or the
/// comparison failed) or SqlError (a database failed), each naming the
/// database and, while copying, the table.
CopyReport copyState(const DatabaseSpec& from, const DatabaseSpec& to,
                     const CopyProgress& progress = {},
                     const Clock& clock = RealClock::instance());

}  // namespace kiln::scheduler
