// The `builtin` evaluator plugin (docs/plugin-abi.md, docs/scheduler.md
// "Evaluations"): kiln's own evaluator, run as `kiln eval --json` in a
// child process that writes every job's `.drv` closure straight into the
// central store. A child rather than the evaluator linked in: a plugin links
// no kiln library, and the memory a long evaluation never frees goes back
// to the system when it exits. Restricted, as Hydra evaluates jobsets: only
// the checkout may be read, and the child gets a clean environment.
#include <algorithm>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kiln/plugin/plugin.hpp"
#include "run_capture.h"

namespace {

using kiln::plugin::Failure;
using kiln::plugin_support::cleanEnvironment;
using kiln::plugin_support::runCapture;
using kiln::plugin_support::tailOf;

class BuiltinEvaluator {
 public:
  /// Configuration: `kiln` (the executable to run; default `kiln` on PATH)
  /// and `workers` (evaluation threads, `kiln eval --workers`; default one
  /// per core, at most 4).
  explicit BuiltinEvaluator(kiln::plugin::Host host)
      : host_(host), kiln_(host.config("kiln").value_or("kiln")) {
    if (kiln_.empty())
      throw Failure(KILN_ERR_INVALID,
                    "the builtin evaluator's 'kiln' is empty");
    workers_ = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
    if (auto w = host.config("workers")) {
      try {
        workers_ = static_cast<unsigned>(std::stoul(*w));
      } catch (const std::exception&) {
        workers_ = 0;
      }
      if (workers_ < 1 || workers_ > kMaxWorkers)
        throw Failure(KILN_ERR_INVALID, "workers must be 1 to " +
                                            std::to_string(kMaxWorkers) +
                                            ", got '" + *w + "'");
    }
  }

  void evaluate(const kiln_eval_request& req, kiln::plugin::EvalSink& sink) {
    auto env = environment(req);
    auto r =
        runCapture(command(req), req.collection_dir, size_t{256} << 20, &env);
    if (r.exitCode != 0)
      throw Failure(KILN_ERR_FAILED, std::string("evaluation of ") + req.file +
                                         " failed (kiln eval exit " +
                                         std::to_string(r.exitCode) +
                                         "): " + tailOf(r.err));
    if (r.truncated)
      throw Failure(KILN_ERR_FAILED, std::string("evaluation of ") + req.file +
                                         ": kiln eval printed more than the "
                                         "capture limit");
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
      if (!line.empty()) {
        sink.job(line);
        host_.metricAdd("jobs_total", 1);
      }
  }

 private:
  std::vector<std::string> command(const kiln_eval_request& req) const {
    std::vector<std::string> cmd = {kiln_,         "eval",
                                    req.file,      "--json",
                                    "--workers",   std::to_string(workers_),
                                    "--constituents", "--state-dir",
                                    req.state_dir,
                                    "--store-dir", req.store_dir};
    if (*req.attribute) cmd.insert(cmd.end(), {"-A", req.attribute});
    for (size_t i = 0; req.arg_names[i]; i++)
      cmd.insert(cmd.end(), {"--arg", req.arg_names[i], req.arg_exprs[i]});
    cmd.insert(cmd.end(),
               {"--restrict-eval", "--allow-path", req.collection_dir});
    return cmd;
  }

  /// What `kiln eval` sees of the scheduler's environment: its search
  /// path, locale and the evaluator's own tuning and debugging variables;
  /// nothing else (no token, key or credential the scheduler was given).
  static std::vector<std::string> environment(const kiln_eval_request& req) {
    return cleanEnvironment(
        {"PATH", "NIX_PATH", "TMPDIR", "LANG", "LC_ALL", "TZ", "KILN_LOG",
         "KILN_TRACE", "KILN_FAIL_POINT", "KILN_GC_*", "KILN_NO_GC",
         "KILN_NO_HEAP_WARMER", "KILN_HUGE_PAGES", "KILN_NO_HUGE_PAGES",
         "KILN_MALLOC_DEFAULTS", "KILN_EVAL_*", "GC_*", "TCMALLOC_*"},
        {std::string("HOME=") + req.work_dir});
  }

  /// kiln eval's limit on --workers (EvalState::kMaxThreads).
  static constexpr unsigned kMaxWorkers = 64;
  kiln::plugin::Host host_;
  std::string kiln_;
  unsigned workers_ = 1;
};

}  // namespace

KILN_EVALUATOR_PLUGIN(BuiltinEvaluator, "builtin", "1.0.0",
                      "kiln's own evaluator (kiln eval --json, restricted)")
