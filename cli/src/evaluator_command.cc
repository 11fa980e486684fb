// `kiln evaluator`: jobset evaluations on a host of their own
// (evaluator_role.h; docs/operations.md, "Running on many machines").
#include <boost/program_options.hpp>
#include <csignal>
#include <filesystem>
#include <iostream>

#include "cli_common.h"
#include "command.h"
#include "database_options.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/logging.h"
#include "kiln/plugin_host/registry.h"
#include "kiln/scheduler/evaluator_role.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;

std::atomic<bool> gEvalStop{false};
void onEvalSignal(int) { gEvalStop = true; }

int runEvaluator(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln evaluator --database postgresql://USER@HOST:PORT/DB "
      "--state-dir DIR\n"
      "         [--name NAME] [--plugin-dir DIR ..]\n\n"
      "Evaluates the farm's jobsets on this host: `jobset-eval` requests\n"
      "first, then jobsets whose check interval passed. Each evaluation's\n"
      "jobs and .drv closures go through the database to the scheduler\n"
      "(`kiln scheduler --evaluations remote`), which checks and records\n"
      "them; the evaluated sources go along (a channel's nixexprs.tar.xz).\n"
      "Run several for more evaluations at once (one per jobset).\n"
      "Stops on SIGINT or SIGTERM, after the evaluation that runs.\n\n"
      "Options");
  scheduler::EvaluatorRoleConfig cfg;
  DatabaseOptions database;
  std::vector<std::string> pluginDirs;
  int64_t leaseSec = 60;
  opts.add_options()("help,h", "show this help")(
      "state-dir", po::value(&cfg.stateDir)->required(),
      "this host's own folder: checkouts and the store evaluations write "
      "into (not the scheduler's)")(
      "store-dir", po::value(&cfg.storeDir),
      "logical store directory (default /nix/store)")(
      "name", po::value(&cfg.name),
      "this evaluator's name in claims and logs (default HOST:PID)")(
      "lease", po::value(&leaseSec),
      "seconds a claim lasts unless renewed: how soon another evaluator "
      "takes over a jobset when this one dies (default 60)")(
      "plugin-dir", po::value(&pluginDirs)->composing(),
      "search evaluator plugins here (repeatable)")(
      "max-source-size", po::value(&cfg.maxSourceBytes),
      "largest evaluated checkout (NAR bytes) sent along as the "
      "evaluation's sources, a channel's nixexprs.tar.xz; larger ones are "
      "not sent (default 1 GiB; 0: none)");
  database.add(opts);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(opts).run(), vm);
    if (vm.count("help")) {
      std::cout << opts;
      return kExitOk;
    }
    po::notify(vm);
    if (database.url.empty())
      throw po::error(
          "--database is required: evaluator hosts share the farm's "
          "PostgreSQL state with the scheduler");
    if (leaseSec < 5 || leaseSec > 3600)
      throw po::error("--lease must be 5..3600 seconds");
    cfg.database = database.spec(cfg.stateDir);
    plugins::configurePluginDirs(pluginDirs);
  } catch (const std::exception& e) {
    std::cerr << "kiln evaluator: " << e.what() << "\n" << opts;
    return kExitUsage;
  }
  return guarded("evaluator", [&] {
    database.requireCurrentSchema();
    createDirs(cfg.stateDir);
    cfg.lease = std::chrono::seconds(leaseSec);
    cfg.kilnBinary = std::filesystem::read_symlink("/proc/self/exe").string();
    scheduler::EvaluatorRole role(cfg);
    std::signal(SIGINT, onEvalSignal);
    std::signal(SIGTERM, onEvalSignal);
    std::cout << "evaluator " << role.name() << " waiting for work"
              << std::endl;
    role.run(gEvalStop);
    logInfo("evaluator stopping");
    return kExitOk;
  });
}

RegisterCommand reg("evaluator",
                    "evaluate the jobsets of a PostgreSQL farm on this host",
                    runEvaluator);

}  // namespace
}  // namespace kiln::cli
