// Opening the state database on either backend, and its migrations
// (docs/scheduler.md, "State"; the schema's SQL: state_schema.cc).
#include "kiln/scheduler/state_db.h"
#include "state_rows.h"

namespace kiln::scheduler {

namespace detail {

namespace {
// The advisory lock that serializes migrations between hosts.
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock(7164350)";

void applyMigrations(SqlConnection& db, int64_t before) {
  const auto& sqlite = stateMigrations();
  if (db.dialect() == SqlDialect::kSqlite) {
    for (auto& m : sqlite) {
      if (m.version <= before) continue;
      db.exec(m.sql);
      db.setUserVersion(m.version);
    }
    return;
  }
  if (before == 0) {
    db.exec(postgresBaseline());
    db.setUserVersion(kPostgresBaselineVersion);
  } else if (before < kPostgresBaselineVersion) {
    throw SchemaError("PostgreSQL database " + db.describe() +
                      " has schema version " + std::to_string(before) +
                      ", which no kiln makes on PostgreSQL");
  }
  for (auto& m : postgresMigrations()) {
    if (m.version <= before) continue;
    db.exec(m.sql);
    db.setUserVersion(m.version);
  }
}
}  // namespace

int64_t migrateState(SqlConnection& db, bool upgrade) {
  int64_t latest = StateDb::schemaVersion();
  int64_t before = 0;
  retryTransient([&] {
    SqlConnection::Txn txn(db);
    if (db.dialect() == SqlDialect::kPostgres) db.exec(kMigrationLock);
    before = db.userVersion();
    if (before > latest)
      throw SchemaError("database " + db.describe() + " has schema version " +
                        std::to_string(before) +
                        ", newer than this kiln reads (" +
                        std::to_string(latest) + "): use a newer kiln");
    if (before == latest) return;
    if (db.dialect() == SqlDialect::kPostgres && before != 0 && !upgrade)
      throw SchemaError("database " + db.describe() + " has schema version " +
                        std::to_string(before) + ", this kiln needs " +
                        std::to_string(latest) +
                        ": stop the older kiln processes, then run `kiln db "
                        "migrate --database " +
                        db.describe() + "`");
    applyMigrations(db, before);
    txn.commit();
  });
  return before;
}

}  // namespace detail

using namespace detail;

DatabaseSpec DatabaseSpec::inStateDir(const std::string& stateDir,
                                      const std::string& url,
                                      const std::string& passwordFile) {
  DatabaseSpec s;
  s.url = url;
  s.passwordFile = passwordFile;
  s.sqlitePath = stateDir + "/scheduler.sqlite";
  return s;
}

std::unique_ptr<SqlConnection> DatabaseSpec::connect(SqlAccess access) const {
  if (isPostgres())
    return openPostgresConnection(url, passwordFile, queryTimeout);
  return openSqliteConnection(sqlitePath, access);
}

StateDb::StateDb(const std::string& path)
    : StateDb(DatabaseSpec{"", "", path}) {}

StateDb::StateDb(const DatabaseSpec& spec)
    : db_(spec.connect(SqlAccess::kCreate)) {
  migrateState(*db_, !spec.isPostgres());
}

StateDb::StateDb(const std::string& path, ReadOnly)
    : StateDb(DatabaseSpec{"", "", path}, ReadOnly{}) {}

StateDb::StateDb(const DatabaseSpec& spec, ReadOnly)
    : db_(spec.connect(SqlAccess::kRead)) {
  requireCurrentSchema();
}

StateDb::StateDb(const DatabaseSpec& spec, Existing)
    : db_(spec.connect(SqlAccess::kWrite)) {
  requireCurrentSchema();
}

int64_t StateDb::migrate(const DatabaseSpec& spec) {
  auto db = spec.connect(SqlAccess::kCreate);
  return migrateState(*db, true);
}

int64_t StateDb::storedVersion(const DatabaseSpec& spec) {
  auto db = spec.connect(SqlAccess::kRead);
  int64_t v = 0;
  retryTransient([&] { v = db->userVersion(); });
  return v;
}

void StateDb::requireCurrentSchema() {
  int64_t v = 0;
  retryTransient([&] { v = db_->userVersion(); });
  if (v == schemaVersion()) return;
  std::string fix =
      v < schemaVersion()
          ? (db_->dialect() == SqlDialect::kPostgres
                 ? "run `kiln db migrate --database " + db_->describe() + "`"
                 : "start `kiln scheduler` (or `kiln db migrate`) on it once")
          : "use a kiln that reads version " + std::to_string(v);
  throw SchemaError(db_->describe() + " has schema version " +
                    std::to_string(v) + ", this kiln reads version " +
                    std::to_string(schemaVersion()) + ": " + fix);
}

int64_t StateDb::schemaVersion() { return stateMigrations().back().version; }

StateDb::Transaction::Transaction(StateDb& db) : txn_(*db.db_) {}

void StateDb::Transaction::commit() { txn_.commit(); }

}  // namespace kiln::scheduler
