// `kiln evaluation show N`: one evaluation of a scheduler's state
// directory, with its whole error and every job that did not evaluate
// (what `kiln serve` points to when an evaluation fails).
#include <boost/program_options.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command.h"
#include "database_options.h"
#include "kiln/common/error.h"
#include "kiln/scheduler/state_view.h"
#include "serve_console.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;
using nlohmann::json;

void printText(const scheduler::EvaluationSummary& s,
               const std::vector<scheduler::EvalErrorRow>& errors) {
  const auto& e = s.eval;
  std::cout << "evaluation " << e.id << " of project " << s.project
            << ", jobset " << s.jobset << "\n"
            << "  inputs:   " << e.inputsHash << "\n"
            << "  took:     " << e.durationMs << " ms\n"
            << "  builds:   " << s.counts.all << " (" << s.counts.finished
            << " finished, " << s.counts.succeeded << " succeeded)\n";
  if (!e.error.empty())
    std::cout << "the evaluation failed:\n"
              << e.error << (e.error.back() == '\n' ? "" : "\n");
  if (errors.empty()) return;
  std::cout << errors.size() << " job" << (errors.size() == 1 ? "" : "s")
            << " did not evaluate:\n";
  for (auto& r : errors)
    std::cout << r.attr << ":\n  " << r.error
              << (!r.error.empty() && r.error.back() == '\n' ? "" : "\n");
}

int evaluationShow(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln evaluation show --state-dir DIR | --database URL [--json] "
      "EVAL\n\n"
      "Prints evaluation EVAL (its id, as `kiln serve` and the dashboard\n"
      "show it): its jobset, inputs and build counts, the whole error of an\n"
      "evaluation that failed, and every job that did not evaluate with\n"
      "its error.\n\nOptions");
  std::string stateDir;
  DatabaseOptions database;
  opts.add_options()("help,h", "show this help")(
      "state-dir", po::value(&stateDir),
      "the scheduler's state directory (its SQLite database)")(
      "json", "print it as JSON");
  database.add(opts);
  std::vector<std::string> ids;
  po::variables_map vm;
  if (auto rc = parseCommandLine("evaluation show", opts, ids, 1, args, vm))
    return *rc;
  if (stateDir.empty() && database.url.empty()) {
    std::cerr << "kiln evaluation show: give --state-dir DIR or --database "
                 "URL\n"
              << opts;
    return kExitUsage;
  }
  int64_t id = 0;
  try {
    size_t used = 0;
    id = std::stoll(ids[0], &used);
    if (used != ids[0].size() || id <= 0) throw std::invalid_argument("");
  } catch (const std::exception&) {
    std::cerr << "kiln evaluation show: '" << ids[0]
              << "' is not an evaluation id (a positive integer)\n";
    return kExitUsage;
  }
  return guarded("evaluation show", [&] {
    auto view = scheduler::StateView::openIfExists(database.spec(stateDir));
    auto summary = view ? view->evaluationSummary(id) : std::nullopt;
    if (!summary) {
      std::cerr << "kiln evaluation show: no evaluation " << id << " in "
                << database.spec(stateDir).describe()
                << " (the dashboard lists them)\n";
      return kExitNotFound;
    }
    auto errors = allEvaluationErrors(*view, id);
    if (!vm.count("json")) {
      printText(*summary, errors);
      return kExitOk;
    }
    json jobErrors = json::array();
    for (auto& r : errors)
      jobErrors.push_back({{"attr", r.attr}, {"error", r.error}});
    std::cout << json{{"id", id},
                      {"project", summary->project},
                      {"jobset", summary->jobset},
                      {"inputsHash", summary->eval.inputsHash},
                      {"durationMs", summary->eval.durationMs},
                      {"error", summary->eval.error},
                      {"builds", summary->counts.all},
                      {"finished", summary->counts.finished},
                      {"succeeded", summary->counts.succeeded},
                      {"jobErrors", jobErrors}}
                     .dump()
              << "\n";
    return kExitOk;
  });
}

RegisterCommand reg("evaluation show",
                    "show an evaluation with its errors (whole and per job)",
                    evaluationShow);

}  // namespace
}  // namespace kiln::cli
