// `kiln eval`: evaluate a package collection into jobs for the scheduler,
// one JSON line per job (Hydra-style enumeration).
#include <boost/program_options.hpp>
#include <iostream>
#include <optional>

#include "command.h"
#include "eval_cli.h"
#include "kiln/common/file.h"
#include "kiln/evaluator/attr_path.h"
#include "kiln/evaluator/jobs.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;
using namespace kiln::eval;

struct EvalOptions {
  std::string file;
  std::string attrPath;
  std::vector<std::string> includes;
  AutoArgSpec autoArgs;
  EvalStoreTarget target;
  bool json = false;
  bool showTrace = false;
  uint32_t maxCallDepth = 10000;
};

EvalSettings makeSettings(EvalOptions& o, const po::variables_map& vm) {
  EvalSettings s;
  s.maxCallDepth = o.maxCallDepth;
  s.showTrace = o.showTrace;
  s.searchPath = o.includes;
  applyNixEnvironment(s);
  o.target.apply(vm, s);
  return s;
}

// Lines are held until the job's .drv is committed (EvalStoreTarget::print).
void printJob(EvalStoreTarget& out, const Job& job, bool json, size_t& failed) {
  if (!job.error.empty()) ++failed;
  if (json) out.print(jobToJson(job) + "\n");
  else if (!job.error.empty()) out.print(job.attr + ": error: " + job.error + "\n");
  else out.print(job.attr + " " + job.drvPath + "\n");
}

int runEval(EvalOptions& o, const po::variables_map& vm) {
  int rc = kExitOk;
  runWithLargeStack([&] {
    try {
      EvalState st(makeSettings(o, vm));
      st.storeWriter = o.target.writer();
      Bindings* autoArgs = makeAutoArgs(st, o.autoArgs);
      std::string path = o.file;
      if (path.size() > 2 && path.front() == '<' && path.back() == '>')
        path = st.findFile(path.substr(1, path.size() - 2), kNoPos);
      Value root;
      st.eval(st.parseExprFromFile(absPath(path)), root);
      Value& selected = *findAlongAttrPath(st, o.attrPath, autoArgs, root);
      size_t jobs = 0, failed = 0;
      enumerateJobs(st, selected, autoArgs, o.attrPath, [&](const Job& job) {
        ++jobs;
        printJob(o.target, job, o.json, failed);
      });
      o.target.flush();
      std::cout.flush();
      if (failed) std::cerr << "kiln eval: " << failed << " of " << jobs << " jobs failed\n";
    } catch (const Error& e) {
      try {
        o.target.flush();  // the jobs enumerated before the error
      } catch (const Error&) {
      }
      std::cout.flush();
      printEvalError(std::cerr, e.what(), o.showTrace);
      rc = kExitFailure;
    }
  });
  return rc;
}

int evalCommand(const std::vector<std::string>& argv) {
  EvalOptions o;
  po::options_description opts(
      "Usage: kiln eval FILE [options]\n\n"
      "Evaluates a package collection and prints one line per job (a JSON\n"
      "object with --json). An error in one job is reported for that job\n"
      "and does not stop the others; the exit code is non-zero only when the\n"
      "collection itself cannot be evaluated. .drv files and sources are\n"
      "written into kiln's store (--state-dir) unless --readonly-mode.\n\nOptions");
  opts.add_options()("help,h", "show this help")(
      "attr,A", po::value(&o.attrPath), "enumerate jobs below this attribute path only")(
      "include,I", po::value(&o.includes), "add a search path entry (prefix=path or path)")(
      "json", po::bool_switch(&o.json), "one JSON object per line")(
      "show-trace", po::bool_switch(&o.showTrace),
      "print the whole trace of an error that stops the evaluation\n"
      "(per-job errors always carry it)")(
      "max-call-depth", po::value(&o.maxCallDepth), "maximum nesting of function calls")(
      "arg", "NAME EXPR: argument for the top-level function")(
      "argstr", "NAME STRING: string argument for the top-level function");
  o.target.addOptions(opts);
  po::options_description hidden;
  hidden.add_options()("file", po::value(&o.file));
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  try {
    std::vector<std::string> rest = takeAutoArgs(argv, o.autoArgs);
    po::store(po::command_line_parser(rest).options(all).positional(pos).run(), vm);
    if (vm.count("help")) {
      std::cout << opts;
      return kExitOk;
    }
    po::notify(vm);
    if (o.file.empty()) throw po::error("a FILE to evaluate is required");
  } catch (const po::error& e) {
    std::cerr << "kiln eval: " << e.what() << "\n" << opts;
    return kExitUsage;
  }
  return runEval(o, vm);
}

RegisterCommand reg("eval", "enumerate the jobs of a package collection (JSON lines)", evalCommand);

}  // namespace
}  // namespace kiln::cli
