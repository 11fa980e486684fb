// `kiln db migrate|version|copy`: the operator's tools for a farm's state
// database (docs/operations.md, "Moving a farm to PostgreSQL"): bring a
// database to this kiln's schema, say which schema it has, and copy a
// whole farm between SQLite and PostgreSQL (scheduler/state_copy.h).
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "cli_common.h"
#include "command.h"
#include "database_options.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/scheduler/state_copy.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;
using scheduler::DatabaseSpec;

// `msg` on one line: each line break (and the indentation after it)
// becomes a single space (libpq's messages span lines).
std::string oneLine(std::string msg) {
  std::string out;
  for (size_t i = 0; i < msg.size(); ++i) {
    if (msg[i] != '\n') {
      out += msg[i];
      continue;
    }
    while (i + 1 < msg.size() && (msg[i + 1] == '\t' || msg[i + 1] == ' ')) ++i;
    if (i + 1 < msg.size()) out += ' ';
  }
  return out;
}

// Runs `body`; a kiln error is printed as one line "kiln NAME: message"
// and gives kExitFailure.
int dbGuarded(const std::string& name, const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::cerr << "kiln " << name << ": " << oneLine(e.what()) << "\n";
    return kExitFailure;
  }
}

// Prints a usage error (one line) and returns kExitUsage.
int usage(const std::string& name, const std::string& msg) {
  std::cerr << "kiln " << name << ": " << msg << " (see kiln " << name
            << " --help)\n";
  return kExitUsage;
}

// The database of --state-dir or --database, or an exit code (usage
// printed); `required`: one of them must be given.
std::optional<int> databaseOf(const std::string& name,
                              const std::string& stateDir,
                              const DatabaseOptions& db, bool required,
                              DatabaseSpec& spec) {
  if (!stateDir.empty() && !db.url.empty())
    return usage(name, "give --state-dir DIR or --database URL, not both");
  if (required && stateDir.empty() && db.url.empty())
    return usage(name, "give --state-dir DIR or --database URL");
  try {
    spec = db.spec(stateDir);
  } catch (const Error& e) {
    return usage(name, oneLine(e.what()));
  }
  return std::nullopt;
}

// kExitNotFound (with a message) when `spec` is SQLite and has no file.
std::optional<int> requireSqliteFile(const std::string& name,
                                     const DatabaseSpec& spec) {
  if (spec.isPostgres() || pathExists(spec.sqlitePath)) return std::nullopt;
  std::cerr << "kiln " << name << ": no state database at " << spec.sqlitePath
            << "\n";
  return kExitNotFound;
}

const char* kDatabaseHelp =
    "The database is the SQLite file DIR/scheduler.sqlite, or a PostgreSQL\n"
    "database: --database postgresql://USER@HOST:PORT/DB, whose password\n"
    "comes from PGPASSFILE (or ~/.pgpass) or --database-password-file,\n"
    "never from the URL.\n\nOptions";

// Parses migrate's and version's options into `spec`.
std::optional<int> parseDatabaseCommand(const std::string& name,
                                        const std::string& intro,
                                        const std::vector<std::string>& args,
                                        bool required, DatabaseSpec& spec) {
  po::options_description opts(intro + kDatabaseHelp);
  std::string stateDir;
  DatabaseOptions db;
  opts.add_options()("help,h", "show this help")(
      "state-dir", po::value(&stateDir), "the farm's state directory");
  db.add(opts);
  po::variables_map vm;
  std::vector<std::string> none;
  if (auto rc = parseCommandLine(name, opts, none, 0, args, vm, 0)) return rc;
  if (auto rc = databaseOf(name, stateDir, db, required, spec)) return rc;
  if (!required && stateDir.empty() && db.url.empty()) spec = {};
  return std::nullopt;
}

int dbMigrate(const std::vector<std::string>& args) {
  DatabaseSpec spec;
  if (auto rc = parseDatabaseCommand(
          "db migrate",
          "Usage: kiln db migrate --state-dir DIR | --database URL "
          "[--database-password-file FILE]\n\n"
          "Brings the farm's state database to this kiln's schema (an empty\n"
          "PostgreSQL database gets the whole schema). Stop the kilns of\n"
          "the older version first: they refuse the migrated database.\n\n",
          args, true, spec))
    return *rc;
  if (auto rc = requireSqliteFile("db migrate", spec)) return *rc;
  return dbGuarded("db migrate", [&] {
    int64_t before = scheduler::StateDb::migrate(spec);
    int64_t now = scheduler::StateDb::schemaVersion();
    if (before == now)
      std::cout << spec.describe() << ": already at version " << now << "\n";
    else
      std::cout << spec.describe() << ": schema version " << before << " → "
                << now << "\n";
    return kExitOk;
  });
}

int dbVersion(const std::vector<std::string>& args) {
  DatabaseSpec spec;
  if (auto rc = parseDatabaseCommand(
          "db version",
          "Usage: kiln db version [--state-dir DIR | --database URL "
          "[--database-password-file FILE]]\n\n"
          "Prints the schema version this kiln reads (supported) and, given\n"
          "a database, the version it has (stored; 0: no schema yet).\n\n",
          args, false, spec))
    return *rc;
  bool given = spec.isPostgres() || !spec.sqlitePath.empty();
  if (given)
    if (auto rc = requireSqliteFile("db version", spec)) return *rc;
  return dbGuarded("db version", [&] {
    int64_t supported = scheduler::StateDb::schemaVersion();
    if (given) {
      int64_t stored = scheduler::StateDb::storedVersion(spec);
      std::cout << "stored: " << stored << "\n";
      if (stored < supported)
        std::cerr << "kiln db version: " << spec.describe()
                  << " is older than this kiln: run `kiln db migrate` on it\n";
      if (stored > supported)
        std::cerr << "kiln db version: " << spec.describe()
                  << " is newer than this kiln: use a newer kiln\n";
    }
    std::cout << "supported: " << supported << "\n";
    return kExitOk;
  });
}

// `kiln db copy`'s options.
struct CopyArgs {
  std::string from, fromDatabase, fromPasswordFile;
  std::string to, toStateDir, toPasswordFile;
};

// One side of the copy from its options, or an exit code (usage printed).
std::optional<int> sideOf(const std::string& side, const std::string& dir,
                          const std::string& url, const std::string& pwfile,
                          const std::string& dirFlag,
                          const std::string& urlFlag, DatabaseSpec& spec) {
  const std::string name = "db copy";
  if (dir.empty() == url.empty())
    return usage(
        name, "give the " + std::string(side == "from" ? "source" : "target") +
                  " once: --" + dirFlag + " DIR or --" + urlFlag + " URL");
  std::string pwFlag = "--" + side + "-password-file";
  if (!pwfile.empty() && url.empty())
    return usage(name, pwFlag + " needs --" + urlFlag);
  if (!pwfile.empty() && !pathExists(pwfile))
    return usage(name, pwFlag + " " + pwfile + " does not exist");
  try {
    scheduler::checkDatabaseUrl(url);
  } catch (const Error& e) {
    return usage(name, "--" + urlFlag + ": " + oneLine(e.what()));
  }
  spec = DatabaseSpec::inStateDir(dir, url, pwfile);
  return std::nullopt;
}

std::optional<int> parseCopy(const std::vector<std::string>& args,
                             DatabaseSpec& from, DatabaseSpec& to) {
  po::options_description opts(
      "Usage: kiln db copy (--from DIR | --from-database URL) (--to URL | "
      "--to-state-dir DIR)\n\n"
      "Copies a whole farm's state (projects, jobsets, evaluations, builds,\n"
      "steps, cached failures, requests, notifications, tokens) with its\n"
      "ids into an empty database of this kiln's schema, in one\n"
      "transaction: on failure the target is left as it was. The source\n"
      "must be at this kiln's schema (`kiln db migrate`); it is only read,\n"
      "from one snapshot, so a scheduler may keep running on it, but what\n"
      "it writes after the copy began stays behind: stop it first.\n"
      "Passwords come from PGPASSFILE or the password files, never a URL.\n"
      "\nOptions");
  CopyArgs a;
  opts.add_options()("help,h", "show this help")(
      "from", po::value(&a.from), "the source state directory (SQLite)")(
      "from-database", po::value(&a.fromDatabase),
      "the source PostgreSQL database (postgresql://USER@HOST:PORT/DB)")(
      "from-password-file", po::value(&a.fromPasswordFile),
      "a file whose first line is the source's PostgreSQL password")(
      "to", po::value(&a.to), "the target PostgreSQL database (URL)")(
      "to-state-dir", po::value(&a.toStateDir),
      "the target state directory (SQLite; created if missing)")(
      "to-password-file", po::value(&a.toPasswordFile),
      "a file whose first line is the target's PostgreSQL password");
  po::variables_map vm;
  std::vector<std::string> none;
  if (auto rc = parseCommandLine("db copy", opts, none, 0, args, vm, 0))
    return rc;
  if (auto rc = sideOf("from", a.from, a.fromDatabase, a.fromPasswordFile,
                       "from", "from-database", from))
    return rc;
  if (!a.to.empty() && !a.to.starts_with("postgres"))
    return usage("db copy",
                 "--to takes a PostgreSQL URL; for a SQLite "
                 "target give --to-state-dir DIR");
  return sideOf("to", a.toStateDir, a.to, a.toPasswordFile, "to-state-dir",
                "to", to);
}

// Prints the report: a line per table, then the totals.
void printReport(const scheduler::CopyReport& r, const DatabaseSpec& from,
                 const DatabaseSpec& to) {
  for (auto& [table, rows] : r.tables) {
    char line[80];
    std::snprintf(line, sizeof line, "  %-16s %12lld\n", table.c_str(),
                  static_cast<long long>(rows));
    std::cout << line;
  }
  double rate = r.seconds > 0 ? r.rows / r.seconds : 0;
  char total[160];
  std::snprintf(total, sizeof total, "copied %lld rows in %.1f s (%.0f rows/s)",
                static_cast<long long>(r.rows), r.seconds, rate);
  std::cout << total << " from " << from.describe() << " to " << to.describe()
            << "\n";
}

int dbCopy(const std::vector<std::string>& args) {
  DatabaseSpec from, to;
  if (auto rc = parseCopy(args, from, to)) return *rc;
  if (auto rc = requireSqliteFile("db copy", from)) return *rc;
  std::string newDir;  // a target directory this command made
  if (!to.isPostgres() && !pathExists(dirNameOf(to.sqlitePath)))
    newDir = dirNameOf(to.sqlitePath);
  int rc = dbGuarded("db copy", [&] {
    if (!newDir.empty()) createDirs(newDir);
    auto report = scheduler::copyState(
        from, to, [](const std::string& table, int64_t rows) {
          std::cerr << "kiln db copy: " << table << ": " << rows << " rows\n";
        });
    printReport(report, from, to);
    return kExitOk;
  });
  if (rc != kExitOk && !newDir.empty()) ::rmdir(newDir.c_str());
  return rc;
}

RegisterCommand regMigrate("db migrate",
                           "bring a state database to this kiln's schema",
                           dbMigrate);
RegisterCommand regVersion(
    "db version", "print the schema version of kiln and of a state database",
    dbVersion);
RegisterCommand regCopy("db copy",
                        "copy a farm's state between SQLite and PostgreSQL",
                        dbCopy);

}  // namespace
}  // namespace kiln::cli
