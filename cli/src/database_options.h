#pragma once
/// The options that say where a farm's state is, shared by every command
/// that reads or changes it: `--state-dir DIR` (logs, the central store,
/// and the SQLite database unless told otherwise), `--database URL`
/// (PostgreSQL) and `--database-password-file FILE`. A password is never
/// taken on the command line: libpq reads PGPASSFILE (or ~/.pgpass), or
/// the first line of the password file.

#include <boost/program_options.hpp>
#include <string>

#include "kiln/scheduler/state_db.h"

namespace kiln::cli {

/// Parsed database options.
struct DatabaseOptions {
  std::string url;           ///< --database; "" = SQLite under the state dir
  std::string passwordFile;  ///< --database-password-file

  /// Adds --database and --database-password-file to `opts`.
  void add(boost::program_options::options_description& opts);
  /// The database of `stateDir` these options name. Throws Error for a URL
  /// that is not PostgreSQL's or that holds a password (before connecting).
  scheduler::DatabaseSpec spec(const std::string& stateDir) const;
  /// Throws Error, saying to run `kiln db migrate`, unless the PostgreSQL
  /// database has this kiln's schema version (SqlError if unreachable).
  void requireCurrentSchema() const;
};

}  // namespace kiln::cli
