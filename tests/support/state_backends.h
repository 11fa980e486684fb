#pragma once
/// The state layer's two backends for parameterised tests: each test gets a
/// fresh, empty state database of the backend its parameter names, SQLite
/// in a folder of its own or a new database on this process's PostgreSQL
/// server (started on first use, stopped at exit; PGPASSFILE is set to its
/// pass file, as an operator's would be).

#include <gtest/gtest.h>

#include <string>

#include "kiln/scheduler/state_db.h"

namespace kiln::test {

/// Which backend a parameterised state test runs on.
enum class StateBackend { kSqlite, kPostgres };

/// Both backends, for INSTANTIATE_TEST_SUITE_P.
inline auto allStateBackends() {
  return ::testing::Values(StateBackend::kSqlite, StateBackend::kPostgres);
}

/// "Sqlite" or "Postgres", for test names.
std::string stateBackendName(
    const ::testing::TestParamInfo<StateBackend>& info);

/// A fresh, empty state database on `backend`: the SQLite file
/// `dir/scheduler.sqlite` (not created yet), or a new PostgreSQL database.
/// Throws Error if PostgreSQL cannot start.
scheduler::DatabaseSpec freshStateDatabase(StateBackend backend,
                                           const std::string& dir);

class PostgresServer;

/// This process's PostgreSQL server (started on first use; tests may stop
/// and start it).
PostgresServer& postgresServerForState();

}  // namespace kiln::test
