#pragma once
/// What the benchmarks that compare the state layer's two backends share
/// (farm_bench, state_bench; bench/README.md "PostgreSQL"): which backends
/// a run measures, a fresh database on one PostgreSQL server for each run,
/// and small helpers for their arguments and figures.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/common/error.h"
#include "kiln/scheduler/state_db.h"
#include "postgres_server.h"

namespace kiln::bench {

/// The backends named by the BACKENDS variable (`sqlite`, `postgres`,
/// comma-separated, in that order), or `fallback` when it is unset.
inline std::vector<std::string> backendsToRun(const std::string& fallback) {
  const char* env = std::getenv("BACKENDS");
  std::string list = env && *env ? env : fallback;
  std::vector<std::string> out;
  std::istringstream in(list);
  for (std::string b; std::getline(in, b, ',');) {
    if (b != "sqlite" && b != "postgres")
      throw Error("BACKENDS: '" + b + "' is neither sqlite nor postgres");
    out.push_back(b);
  }
  return out;
}

/// A fresh state database per run: SQLite in the run's folder, or a new
/// database on one PostgreSQL server started on first use (loopback TCP,
/// scripts/start-postgres.sh's settings), whose PGPASSFILE this process
/// and the kiln processes it starts then use.
class BenchDatabases {
 public:
  /// The URL of a new PostgreSQL database for `backend` "postgres", else
  /// "" (SQLite).
  std::string freshUrl(const std::string& backend) {
    if (backend != "postgres") return "";
    if (!pg_) {
      std::string why;
      if (!test::PostgresServer::available(&why))
        throw Error("PostgreSQL cannot run here: " + why);
      pg_ = std::make_unique<test::PostgresServer>();
      setenv("PGPASSFILE", pg_->passFile().c_str(), 1);
    }
    return pg_->createDatabase("bench_" + std::to_string(++databases_));
  }

 private:
  std::unique_ptr<test::PostgresServer> pg_;
  int databases_ = 0;
};

/// The median of `v` (NaN when empty).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n == 0 ? NAN : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// The integer variable `name`, at least 1; 1 when unset.
inline int repsFromEnv(const char* name = "REPS") {
  const char* v = std::getenv(name);
  return std::max(1, v ? std::atoi(v) : 1);
}

/// Argument `i` as an integer, or `def` when there are fewer.
inline int intArg(int argc, char** argv, int i, int def) {
  return argc > i ? std::atoi(argv[i]) : def;
}

}  // namespace kiln::bench
