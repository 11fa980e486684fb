// An evaluator plugin for the loader's and the scheduler's tests, written
// with the C++ helper. Compiled twice: TEST_PLUGIN_NAME names it, and
// KILN_PLUGIN_ABI_MINOR=3 builds it against the minor before evaluators had
// `evaluate` (the common table only). Its configuration says what to do:
// `lines` (job lines, one per line, reported as they are), `fail` (fail
// the evaluation with that message), `import-root` (ask the host to import
// from that Nix store root, which it must refuse outside the work folder).
#include <sstream>

#include "kiln/plugin/plugin.hpp"

namespace {

class FakeEvaluator {
 public:
  explicit FakeEvaluator(kiln::plugin::Host host) : host_(host) {
    if (host_.config("fail-create"))
      throw kiln::plugin::Failure(KILN_ERR_INVALID, "evaluator told to fail");
    host_.metricAdd("created_total", 1);
  }
#if KILN_PLUGIN_ABI_MINOR >= 4
  void evaluate(const kiln_eval_request& req, kiln::plugin::EvalSink& sink) {
    if (auto root = host_.config("import-root")) sink.importNixStore(*root, {});
    if (auto msg = host_.config("fail"))
      throw kiln::plugin::Failure(KILN_ERR_FAILED,
                                  *msg + " (jobset " + req.jobset + ")");
    std::istringstream lines(host_.config("lines").value_or(""));
    for (std::string line; std::getline(lines, line);) {
      sink.job(line);
      host_.metricAdd("jobs_total", 1);
    }
  }
#endif

 private:
  kiln::plugin::Host host_;
};

}  // namespace

#if KILN_PLUGIN_ABI_MINOR >= 4
KILN_EVALUATOR_PLUGIN(FakeEvaluator, TEST_PLUGIN_NAME, "0.0.1",
                      "an evaluator reporting configured lines (tests)")
#else
KILN_GENERIC_PLUGIN(KILN_PLUGIN_EVALUATOR, FakeEvaluator, TEST_PLUGIN_NAME,
                    "0.0.1", "an evaluator of ABI minor 3 (tests)")
#endif
