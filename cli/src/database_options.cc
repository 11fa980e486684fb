#include "database_options.h"

#include "kiln/common/error.h"
#include "kiln/common/file.h"

namespace kiln::cli {

namespace po = boost::program_options;

void DatabaseOptions::add(po::options_description& opts) {
  opts.add_options()(
      "database", po::value(&url),
      "the farm's state in PostgreSQL (postgresql://USER@HOST:PORT/DB; the "
      "password from PGPASSFILE or --database-password-file); default: "
      "SQLite under --state-dir")(
      "database-password-file", po::value(&passwordFile),
      "a file whose first line is the PostgreSQL password");
}

scheduler::DatabaseSpec DatabaseOptions::spec(
    const std::string& stateDir) const {
  if (!passwordFile.empty() && url.empty())
    throw Error("--database-password-file needs --database");
  if (!passwordFile.empty() && !pathExists(passwordFile))
    throw Error("--database-password-file " + passwordFile + " does not exist");
  scheduler::checkDatabaseUrl(url);
  return scheduler::DatabaseSpec::inStateDir(stateDir, url, passwordFile);
}

void DatabaseOptions::requireCurrentSchema() const {
  auto version = scheduler::StateDb::storedVersion(spec(""));
  if (version != scheduler::StateDb::schemaVersion())
    throw Error("database " + url + " has schema version " +
                std::to_string(version) + ", this kiln reads " +
                std::to_string(scheduler::StateDb::schemaVersion()) +
                ": run `kiln db migrate --database " + url + "`");
}

}  // namespace kiln::cli
