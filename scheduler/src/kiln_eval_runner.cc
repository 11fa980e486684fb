// The default EvalRunner: `kiln eval --json` writing straight into the
// central store (docs/scheduler.md, "Evaluations").
#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "kiln/common/logging.h"
#include "kiln/scheduler/evaluation.h"
#include "run_command.h"

namespace kiln::scheduler {

namespace {

class KilnEvalRunner final : public EvalRunner {
 public:
  explicit KilnEvalRunner(std::string kiln) : kiln_(std::move(kiln)) {}

  std::vector<Job> evaluate(const JobsetSpec& js, const Checkout& co,
                            const EvalStore& target) override {
    std::string file = co.dir + "/" + js.file;
    auto cmd = command(js, file, target);
    // Restricted, as Hydra evaluates jobsets: only the checkout (and the
    // scheduler's own -I/NIX_PATH entries) may be read, no environment.
    cmd.insert(cmd.end(), {"--restrict-eval", "--allow-path", co.dir});
    auto r = runCommand(cmd, co.dir);
    if (r.exitCode != 0)
      throw Error("evaluation of " + file + " failed (kiln eval exit " +
                  std::to_string(r.exitCode) + "): " + r.err);
    store::LocalStore store(target.stateDir, store::StoreDir(target.storeDir));
    std::vector<Job> jobs;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.empty()) continue;
      jobs.push_back(parseJobLine(line));
      check(jobs.back(), js, store);
    }
    return jobs;
  }

 private:
  std::vector<std::string> command(const JobsetSpec& js, const std::string& file,
                                   const EvalStore& target) const {
    // Jobs are evaluated in worker processes, one per core (at most 4):
    // parallel, and memory a long evaluation never frees goes back to the
    // system when a worker passes --max-memory-size (docs/evaluator.md).
    unsigned workers = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
    std::vector<std::string> cmd = {kiln_,         "eval",
                                    file,          "--json",
                                    "--workers",   std::to_string(workers),
                                    "--state-dir", target.stateDir,
                                    "--store-dir", target.storeDir};
    if (!js.attribute.empty()) cmd.insert(cmd.end(), {"-A", js.attribute});
    nlohmann::json args;
    try {
      args = nlohmann::json::parse(js.arguments);
    } catch (const nlohmann::json::exception& e) {
      throw FormatError("jobset '" + js.name + "': arguments are not JSON: " +
                        e.what());
    }
    for (auto& [name, expr] : args.items()) {
      if (!expr.is_string())
        throw FormatError("jobset '" + js.name + "': argument '" + name +
                          "' is not a string holding a Nix expression");
      cmd.insert(cmd.end(), {"--arg", name, expr.get<std::string>()});
    }
    return cmd;
  }

  // Job names are relative to the jobset's attribute, as with the
  // nix-instantiate adapter; the .drv must be valid in the central store
  // (kiln eval wrote it) and is held by a temporary root from here on.
  static void check(Job& job, const JobsetSpec& js, store::LocalStore& store) {
    std::string prefix = js.attribute + ".";
    if (!js.attribute.empty() && job.attr.starts_with(prefix))
      job.attr = job.attr.substr(prefix.size());
    if (!job.error.empty()) return;
    auto drv = store.parsePath(job.drvPath);
    store.addTempRoot(drv);
    if (!store.isValid(drv))
      job.error = "kiln eval reported " + job.drvPath +
                  " but it is not valid in the store (collected meanwhile?)";
  }

  std::string kiln_;
};

}  // namespace

std::unique_ptr<EvalRunner> makeKilnEvalRunner(std::string kilnBinary) {
  return std::make_unique<KilnEvalRunner>(std::move(kilnBinary));
}

}  // namespace kiln::scheduler
