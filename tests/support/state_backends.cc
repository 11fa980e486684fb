#include "state_backends.h"

#include <cstdlib>
#include <memory>

#include "postgres_server.h"

namespace kiln::test {

std::string stateBackendName(
    const ::testing::TestParamInfo<StateBackend>& info) {
  return info.param == StateBackend::kSqlite ? "Sqlite" : "Postgres";
}

PostgresServer& postgresServerForState() {
  // Destroyed at exit, which stops the server and removes its folder.
  static std::unique_ptr<PostgresServer> server = [] {
    auto s = std::make_unique<PostgresServer>();
    setenv("PGPASSFILE", s->passFile().c_str(), 1);
    return s;
  }();
  return *server;
}

scheduler::DatabaseSpec freshStateDatabase(StateBackend backend,
                                           const std::string& dir) {
  scheduler::DatabaseSpec spec = scheduler::DatabaseSpec::inStateDir(dir);
  if (backend == StateBackend::kPostgres) {
    static int next = 0;
    spec.url = postgresServerForState().createDatabase("state_" +
                                                       std::to_string(++next));
  }
  return spec;
}

}  // namespace kiln::test
