// `kiln eval`: evaluate a package collection into jobs for the scheduler,
// one JSON line per job (Hydra-style enumeration).
#include <unistd.h>

#include <atomic>
#include <boost/program_options.hpp>
#include <iostream>
#include <optional>

#include "command.h"
#include "cli_common.h"
#include "eval_cli.h"
#include "eval_output.h"
#include "kiln/common/file.h"
#include "kiln/evaluator/attr_path.h"
#include "kiln/evaluator/eval_stats.h"
#include "kiln/evaluator/job_threads.h"
#include "kiln/evaluator/job_workers.h"
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
  bool json = false;           // --json: --format json
  std::string formatName;      // --format
  JobFormat format = JobFormat::kLines;
  bool meta = false;           // --meta (nix-eval-jobs format)
  JobWalkOptions walk;         // --force-recurse, --constituents
  bool checkCacheStatus = false;
  std::vector<std::string> substituters;  // caches for --check-cache-status
  bool showTrace = false;
  uint32_t maxCallDepth = 10000;
  unsigned workers = 0;     ///< >0: evaluate on this many threads (one heap)
  unsigned processes = 0;   ///< >0: evaluate in this many forked worker processes
  size_t maxMemoryMiB = 4096;  ///< with processes: a worker above this size is replaced
  bool restrictEval = false;             // --restrict-eval (jobsets)
  bool pureEval = false;                 // --pure-eval (Nix's pure-eval)
  std::vector<std::string> allowPaths;   // --allow-path
  std::vector<std::string> allowedUris;  // --allowed-uris
};

EvalSettings makeSettings(EvalOptions& o, const po::variables_map& vm) {
  EvalSettings s;
  s.maxCallDepth = o.maxCallDepth;
  s.showTrace = o.showTrace;
  s.searchPath = o.includes;
  applyNixEnvironment(s);
  o.target.apply(vm, s);
  s.restrictEval = s.refuseCurrentTime = o.restrictEval;
  s.pureEval = o.pureEval;
  s.parseThreads = o.workers >= 2 ? 2 : 1;
  s.allowedPaths = o.allowPaths;
  s.allowedUris = o.allowedUris;
  s.restrictHint = " (restricted evaluation: allow paths with --allow-path PATH or -I PATH, "
                   "URIs with --allowed-uris PREFIX)";
  return s;
}

// A job that reports an error is a failed one (the exit status and the
// summary line count them).
bool jobFailed(const Job& job) { return !job.error.empty(); }

// Lines are held until the job's .drv is committed (EvalStoreTarget::print).
void printJob(EvalOptions& o, const Job& job, JobCounts& counts) {
  ++counts.jobs;
  if (jobFailed(job)) ++counts.failed;
  o.target.print(formatJob(job, o.format, o.meta));
}

// The top-level entries evaluated in worker processes (--processes).
class EvalWorkerHooks final : public JobWorkerHooks {
 public:
  EvalWorkerHooks(EvalOptions& o, EvalState& st, const JobRoot& root, Bindings* autoArgs,
                  JobOutputStage& stage)
      : o_(o), st_(st), root_(root), autoArgs_(autoArgs), stage_(stage) {}
  void startWorker() override {
    o_.target.detachAfterFork();
    stage_.afterFork();
    st_.setStoreWriter(o_.target.writer());
  }
  JobCounts evaluate(size_t index) override {
    JobCounts c;
    enumerateJobEntry(st_, root_, index, autoArgs_, o_.attrPath,
                      [&](const Job& job) { printJob(o_, job, c); });
    return c;
  }
  void print(const std::string& marker) override { o_.target.print(marker); }
  void stopWorker() override {
    o_.target.close();
    std::cout.flush();
  }
  std::string lostItem(size_t index, const std::string& why) override {
    Job job;
    job.attr = jobEntryAttr(st_, root_, index, o_.attrPath);
    job.error = why;
    return formatJob(job, o_.format, o_.meta);
  }

 private:
  EvalOptions& o_;
  EvalState& st_;
  const JobRoot& root_;
  Bindings* autoArgs_;
  JobOutputStage& stage_;
};

JobCounts evalJobs(EvalOptions& o, EvalState& st, Value& selected, Bindings* autoArgs,
                   JobOutputStage& stage) {
  // With threads, they share the root's long strict list builtins too.
  JobRoot root = prepareJobRootThreaded(st, selected, autoArgs, o.walk, o.workers);
  size_t entries = root.isDerivation ? 1 : root.entries.size();
  JobCounts counts;
  if (o.workers > 0 && !root.isDerivation) {
    // Lines are made on the threads and printed once every entry is
    // evaluated, in entry order (the writer is shared by the threads until
    // then).
    std::atomic<size_t> jobs{0}, failed{0};
    enumerateJobsThreaded(
        st, root, autoArgs, o.attrPath, o.workers,
        [&](const Job& job, std::string& text) {
          jobs.fetch_add(1, std::memory_order_relaxed);
          if (jobFailed(job)) failed.fetch_add(1, std::memory_order_relaxed);
          text += formatJob(job, o.format, o.meta);
        },
        [&](size_t, const std::string& text) { o.target.print(text); });
    counts.jobs = jobs.load();
    counts.failed = failed.load();
    return counts;
  }
  if (o.processes == 0 || root.isDerivation) {
    for (size_t i = 0; i < entries; ++i)
      enumerateJobEntry(st, root, i, autoArgs, o.attrPath,
                        [&](const Job& job) { printJob(o, job, counts); });
    return counts;
  }
  o.target.flush();  // a worker starts with nothing queued or held
  EvalWorkerHooks hooks(o, st, root, autoArgs, stage);
  JobCounts counts2 =
      runJobWorkers(entries, {o.processes, o.maxMemoryMiB << 20}, hooks, stage.workerOutputFd());
  stage.collectWorkers();
  return counts2;
}

int runEval(EvalOptions& o, const po::variables_map& vm) {
  int rc = kExitOk;
  if (o.workers > 0) setCollectorForThreads(o.workers);
  runWithLargeStack([&] {
    try {
      EvalState& st = makeProcessEvalState(makeSettings(o, vm));  // left to exit
      st.setStoreWriter(o.target.writer());
      JobOutputStage stage(o.target, o.checkCacheStatus, listWords(o.substituters),
                           o.walk.constituents);
      Bindings* autoArgs = makeAutoArgs(st, o.autoArgs);
      std::string path = o.file;
      if (path.size() > 2 && path.front() == '<' && path.back() == '>')
        path = st.findFile(path.substr(1, path.size() - 2), kNoPos);
      Value root;
      st.eval(st.parseExprFromFile(st.checkSourcePath(absPath(path))), root);
      Value& selected = *findAlongAttrPath(st, o.attrPath, autoArgs, root);
      JobCounts counts = evalJobs(o, st, selected, autoArgs, stage);
      o.target.flush();
      counts.failed += stage.finish();
      std::cout.flush();
      maybePrintEvalStats(st);  // KILN_EVAL_STATS (this process's evaluation)
      if (counts.failed)
        std::cerr << "kiln eval: " << counts.failed << " of " << counts.jobs << " jobs failed\n";
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
      "json", po::bool_switch(&o.json), "one JSON object per line (--format json)")(
      "format", po::value(&o.formatName),
      "lines (default), json (kiln's JSON lines) or nix-eval-jobs (the field names and meanings of nix-eval-jobs, docs/formats.md)")(
      "meta", po::bool_switch(&o.meta), "with --format nix-eval-jobs: include `meta`")(
      "force-recurse", po::bool_switch(&o.walk.forceRecurse),
      "enter every attribute set, not only those with recurseForDerivations = true")(
      "constituents", po::bool_switch(&o.walk.constituents),
      "aggregate jobs (_hydraAggregate = true): list their constituents' .drv paths, job names resolved once every job is known (aggregates are printed last)")(
      "check-cache-status", po::bool_switch(&o.checkCacheStatus),
      "say of each job whether its outputs are in kiln's store (local), in a --substituters cache (cached) or neither (notBuilt), with what must be built and fetched (JSON formats; not --readonly-mode)")(
      "substituters", po::value(&o.substituters)->composing(),
      "binary caches --check-cache-status looks in (http://HOST[:PORT], file:///DIR or s3://BUCKET?endpoint=URL; space-separated, repeatable)")(
      "show-trace", po::bool_switch(&o.showTrace),
      "print the whole trace of an error that stops the evaluation\n"
      "(per-job errors always carry it)")(
      "max-call-depth", po::value(&o.maxCallDepth), "maximum nesting of function calls")(
      "workers", po::value(&o.workers),
      "evaluate the top-level jobs on N threads sharing one heap (what\n"
      "one thread evaluates the others use; the root's long concatMap and\n"
      "filter calls, as filterAttrs over a package set, are shared too;\n"
      "default: one thread)")(
      "processes", po::value(&o.processes),
      "evaluate the top-level jobs in N forked worker processes instead\n"
      "(not with --workers)")(
      "max-memory-size", po::value(&o.maxMemoryMiB),
      "with --processes: replace a worker whose resident size exceeds\n"
      "this many MiB after a job (default 4096)")(
      "restrict-eval", po::bool_switch(&o.restrictEval),
      "restricted evaluation, as Hydra's for jobsets: files only below -I\n"
      "entries and --allow-path paths (and store paths it made); getEnv\n"
      "gives \"\"; currentTime, other store paths and fetchers are refused")(
      "pure-eval", po::bool_switch(&o.pureEval),
      "Nix 2.8's pure evaluation: files only below --allow-path paths (the\n"
      "search path is ignored), no currentTime/currentSystem, getEnv gives\n"
      "\"\", storePath refused, fetchers need a hash")(
      "allow-path", po::value(&o.allowPaths),
      "with --restrict-eval or --pure-eval: a path that may be read, with what is below it\n"
      "(repeatable; the scheduler passes the jobset's checkout)")(
      "allowed-uris", po::value(&o.allowedUris),
      "with --restrict-eval: a URI prefix fetchers may use (repeatable)")(
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
    if (o.json && !o.formatName.empty() && o.formatName != "json")
      throw po::error("--json and --format " + o.formatName + " exclude each other");
    o.format = o.json ? JobFormat::kJson : JobFormat::kLines;
    if (!o.formatName.empty()) {
      try {
        o.format = parseJobFormat(o.formatName);
      } catch (const Error& e) {
        throw po::error(e.what());
      }
    }
    if ((o.checkCacheStatus || o.walk.constituents) && o.format == JobFormat::kLines)
      throw po::error(
          "--check-cache-status and --constituents add JSON fields: use --format "
          "nix-eval-jobs or --json");
    if (o.checkCacheStatus && vm["readonly-mode"].as<bool>())
      throw po::error(
          "--check-cache-status reads the jobs' .drv files from the store: it cannot be "
          "used with --readonly-mode");
    if (o.workers > 0 && o.processes > 0)
      throw po::error("--workers and --processes exclude each other");
    if (o.workers > EvalState::kMaxThreads)
      throw po::error("--workers must be at most " + std::to_string(EvalState::kMaxThreads));
    if (vm.count("max-memory-size") && o.processes == 0)
      throw po::error(
          "--max-memory-size applies to --processes (worker processes replaced at a "
          "memory limit); --workers threads share one heap");
  } catch (const po::error& e) {
    std::cerr << "kiln eval: " << e.what() << "\n" << opts;
    return kExitUsage;
  }
  return runEval(o, vm);
}

RegisterCommand reg("eval", "enumerate the jobs of a package collection (JSON lines)", evalCommand);

}  // namespace
}  // namespace kiln::cli
