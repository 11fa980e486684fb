// `kiln log`: prints a step's build log (like `nix log`), the last attempt
// unless told otherwise: from the state database when it holds the log (a
// PostgreSQL farm's scheduler stores them there), else from the log files
// of the scheduler's state directory.
#include <boost/program_options.hpp>
#include <iostream>

#include "cli_common.h"
#include "command.h"
#include "database_options.h"
#include "kiln/common/error.h"
#include "kiln/scheduler/logs.h"
#include "kiln/scheduler/state_view.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;
using scheduler::StepLog;

constexpr size_t kPieceBytes = 1 << 20;

// Where `log` is, for --list.
std::string whereOf(const StepLog& log) {
  switch (log.where) {
    case StepLog::Where::kFile:
      return log.path;
    case StepLog::Where::kStored:
      return "database";
    case StepLog::Where::kLive:
      return "database (running)";
  }
  return "";
}

// Copies `log` to stdout in bounded pieces.
void printLog(scheduler::StateDb& db, const StepLog& log) {
  scheduler::StepLogReader reader(log);
  int64_t offset = 0;
  for (;;) {
    std::string piece = reader.read(db, offset, kPieceBytes);
    if (piece.empty()) break;
    std::cout.write(piece.data(), static_cast<std::streamsize>(piece.size()));
    offset += static_cast<int64_t>(piece.size());
  }
  std::cout.flush();
  if (!std::cout) throw Error("writing the log to stdout failed");
}

int logCommand(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln log [--state-dir DIR] [--database URL] [--attempt N | "
      "--list] DRV\n\n"
      "Prints the build log of the step that builds DRV (a .drv path or its\n"
      "base name), as the scheduler received it from the worker: the last\n"
      "attempt by default. With --database, the step and its log are read\n"
      "from there (a PostgreSQL farm's scheduler stores the logs in it);\n"
      "logs it does not hold are read from --state-dir's log files.\n\n"
      "Options");
  std::string stateDir;
  DatabaseOptions database;
  int attempt = 0;
  opts.add_options()("help,h", "show this help")(
      "state-dir", po::value(&stateDir),
      "the scheduler's state directory (needed without --database)")(
      "attempt", po::value(&attempt), "print this attempt (1 = the first)")(
      "list",
      "list the attempts that have a log, one per line, with where it is");
  database.add(opts);
  std::vector<std::string> drvs;
  po::variables_map vm;
  if (auto rc = parseCommandLine("log", opts, drvs, 1, args, vm)) return *rc;
  return guarded("log", [&] {
    if (stateDir.empty() && database.url.empty()) {
      std::cerr << "kiln log: give --state-dir or --database\n" << opts;
      return kExitUsage;
    }
    auto view = scheduler::StateView::openIfExists(database.spec(stateDir));
    auto logs = view ? scheduler::stepLogs(view->rows(), stateDir, drvs[0])
                     : std::vector<StepLog>{};
    if (vm.count("list")) {
      for (auto& log : logs)
        std::cout << log.attempt << "\t" << whereOf(log) << "\n";
      return kExitOk;
    }
    const StepLog* chosen = nullptr;
    for (auto& log : logs)
      if (attempt == 0 || log.attempt == attempt) chosen = &log;
    if (!chosen) {
      std::cerr << "kiln log: no build log for " << drvs[0]
                << (attempt ? " attempt " + std::to_string(attempt) : "")
                << " in "
                << (database.url.empty() ? stateDir + "/logs" : database.url)
                << " (has the step started? see `kiln queue`)\n";
      return kExitNotFound;
    }
    printLog(view->rows(), *chosen);
    return kExitOk;
  });
}

RegisterCommand reg("log", "print the build log of a derivation's step",
                    logCommand);

}  // namespace
}  // namespace kiln::cli
