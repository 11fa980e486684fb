// `kiln build`: nix-build on a farm of one process. Evaluates FILE (and
// -A attribute paths) into kiln's store, builds the derivations with an
// embedded scheduler and local workers in the sandbox, shows progress, and
// leaves `result` symlinks (GC roots) like nix-build.
#include <signal.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <future>
#include <iostream>
#include <sstream>

#include "build_progress.h"
#include "cli_common.h"
#include "command.h"
#include "eval_cli.h"
#include "kiln/common/file.h"
#include "kiln/common/logging.h"
#include "kiln/common/trace.h"
#include "kiln/evaluator/attr_path.h"
#include "kiln/evaluator/eval_state.h"
#include "kiln/store/local_store.h"
#include "local_farm.h"
#include "substitute.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;

struct Options {
  std::string file = "./default.nix";
  std::vector<std::string> attrPaths;
  std::vector<std::string> includes;
  AutoArgSpec autoArgs;
  EvalStoreTarget target;
  SandboxOptions sandbox;
  unsigned jobs = 0;
  bool keepGoing = false, noOutLink = false, showTrace = false;
  bool fsyncStore = false;  ///< fsync each file added to the stores
  std::string outLink = "result";
  std::vector<std::string> substituters;  ///< space-separated lists
  std::vector<std::string> trustedKeys;   ///< space-separated lists
};

// Fetches what the substituters have of `targets` into the store.
void substitute(Options& o, const std::vector<BuildTarget>& targets) {
  SubstituteOptions so;
  so.urls = listWords(o.substituters);
  if (so.urls.empty()) return;
  for (auto& k : listWords(o.trustedKeys))
    so.trust.keys.add(store::PublicKey::parse(k));
  auto& st = *o.target.localStore();
  std::vector<store::StorePath> drvs;
  for (auto& t : targets) drvs.push_back(st.parsePath(t.drvPath));
  substituteOutputs(st, drvs, so);
}

std::atomic<bool> gInterrupted{false};
void onInterrupt(int) { gInterrupted.store(true); }

// The target of a collected derivation output of attribute path `path`.
BuildTarget targetOf(const std::string& path, const eval::CollectedDrv& d) {
  BuildTarget t;
  t.drvPath = std::string(d.drvPath);
  t.job = path.empty() ? std::string(baseNameOf(t.drvPath)).substr(33) : path;
  t.output = d.output.empty() ? "out" : std::string(d.output);
  return t;
}

// Evaluates the file and attribute paths into the store; the targets in
// command-line order. Throws Error (evaluation errors included).
std::vector<BuildTarget> evaluate(Options& o,
                                  const eval::EvalSettings& settings) {
  std::vector<BuildTarget> targets;
  std::optional<Error> failed;
  eval::runWithLargeStack([&] {
    try {
      eval::EvalState st(settings);
      st.setStoreWriter(o.target.writer());
      eval::Bindings* autoArgs = makeAutoArgs(st, o.autoArgs);
      eval::Value root;
      st.eval(st.parseExprFromFile(st.checkSourcePath(absPath(o.file))), root);
      auto paths =
          o.attrPaths.empty() ? std::vector<std::string>{""} : o.attrPaths;
      for (auto& path : paths) {
        eval::Value& v = *eval::findAlongAttrPath(st, path, autoArgs, root);
        for (auto& d : eval::collectDerivations(st, v, autoArgs))
          targets.push_back(targetOf(path, d));
      }
      o.target.flush();
    } catch (const Error& e) {
      failed.emplace(e.what());
    }
  });
  if (failed) throw *failed;
  return targets;
}

// Makes `result`, `result-2`, `result-dev`... as nix-build names them,
// each a GC root; prints the output paths.
void linkResults(const Options& o, const std::string& stateDir,
                 const std::string& storeDir,
                 const std::vector<BuildTarget>& targets) {
  store::LocalStore store(stateDir, store::StoreDir(storeDir));
  int rootNr = 0;
  for (auto& t : targets) {
    std::string link = absPath(o.outLink);
    if (++rootNr > 1) link += "-" + std::to_string(rootNr);
    if (t.output != "out") link += "-" + t.output;
    auto path = store.parsePath(t.outputPath);
    if (!o.noOutLink)
      store.addIndirectRoot(path, link, /*physicalTarget=*/true);
    std::cout << store.physicalPath(path) << "\n";
  }
}

int build(Options& o, const eval::EvalSettings& settings) {
  // Like nix-build (Nix has no per-path fsync): the files of store paths
  // are not fsynced one by one unless asked; registrations are as always.
  if (auto* st = o.target.localStore(); st && !o.fsyncStore)
    st->setContentSync(store::LocalStore::ContentSync::kNone);
  // The farm's own chatter (listening, joined, welcomed) is not news to
  // someone running one build; warnings and errors still show.
  if (logLevel() == LogLevel::kInfo) setLogLevel(LogLevel::kWarn);
  LocalFarmConfig fc;
  fc.stateDir = o.target.localStore()->stateDir();
  fc.storeDir = settings.storeDir;
  fc.jobs = o.jobs ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  fc.sandbox = o.sandbox;
  fc.syncStoreFiles = o.fsyncStore;
  // The farm (its state, the worker's store, the sandbox's probe) starts
  // while the expression is evaluated: neither needs the other, and it
  // took longer than the evaluation of examples/pkgset. Whatever happens
  // here, the future's destructor waits for it (and a farm it made is
  // stopped) before this function returns.
  auto farmStarting = std::async(std::launch::async, [fc] {
    auto farm = std::make_unique<LocalFarm>(fc);
    traceEvent("build", "farm-started", 0);
    return farm;
  });
  traceEvent("build", "evaluating", 0);
  std::vector<BuildTarget> targets = evaluate(o, settings);
  traceEvent("build", "evaluated", 0, std::to_string(targets.size()));
  if (targets.empty()) {
    std::cerr << "kiln build: the expression holds no derivation\n";
    return kExitOk;
  }
  substitute(o, targets);
  traceEvent("build", "substituted", 0);
  BuildOutcome outcome;
  {
    std::unique_ptr<LocalFarm> farm = farmStarting.get();
    signal(SIGINT, onInterrupt);
    signal(SIGTERM, onInterrupt);
    BuildProgress progress(*farm, targets, o.keepGoing, isatty(STDERR_FILENO));
    outcome = progress.run(gInterrupted);
    traceEvent("build", "builds-finished", 0);
  }
  traceEvent("build", "farm-stopped", 0);
  if (!outcome.ok()) {
    std::cerr << outcome.report(fc.stateDir);
    return kExitFailure;
  }
  linkResults(o, fc.stateDir, settings.storeDir, outcome.targets);
  traceEvent("build", "linked", 0);
  return kExitOk;
}

// Parses argv into `o`; returns an exit code to stop with, or -1.
int parseArgs(const std::vector<std::string>& argv, Options& o,
              po::options_description& opts, po::variables_map& vm) {
  opts.add_options()("help,h", "show this help")(
      "attr,A", po::value(&o.attrPaths),
      "build this attribute path (repeatable)")(
      "include,I", po::value(&o.includes),
      "add a search path entry (prefix=path or path)")(
      "jobs,j", po::value(&o.jobs),
      "builds at once (default: the number of cores)")(
      "keep-going,k", po::bool_switch(&o.keepGoing),
      "go on building what does not depend on a failure")(
      "out-link,o", po::value(&o.outLink),
      "name of the result symlinks (default result)")(
      "no-out-link", po::bool_switch(&o.noOutLink), "make no result symlinks")(
      "fsync-store", po::bool_switch(&o.fsyncStore),
      "fsync every file added to the stores before registering it (by "
      "default, as in Nix, store files are left to the kernel)")(
      "show-trace", po::bool_switch(&o.showTrace),
      "print the whole trace of an evaluation error")(
      "substituters", po::value(&o.substituters)->composing(),
      "binary caches to fetch outputs from before building "
      "(http://HOST[:PORT], file:///DIR or s3://BUCKET?endpoint=URL; "
      "space-separated, repeatable)")(
      "trusted-public-keys", po::value(&o.trustedKeys)->composing(),
      "keys whose signatures make a cache's paths trusted (NAME:BASE64; "
      "space-separated, repeatable)")(
      "arg", "NAME EXPR: argument for the top-level function")(
      "argstr", "NAME STRING: string argument for the top-level function");
  o.target.addOptions(opts);
  addSandboxOptions(opts, o.sandbox);
  po::options_description hidden;
  hidden.add_options()("file", po::value(&o.file));
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("file", 1);
  po::store(po::command_line_parser(takeAutoArgs(argv, o.autoArgs))
                .options(all)
                .positional(pos)
                .run(),
            vm);
  if (vm.count("help")) {
    std::cout << opts;
    return kExitOk;
  }
  po::notify(vm);
  return -1;
}

int runBuild(const std::vector<std::string>& argv) {
  Options o;
  po::options_description opts(
      "Usage: kiln build [options] [FILE] [-A ATTR]... [--arg NAME EXPR]...\n\n"
      "Builds the derivations of FILE (default ./default.nix), or of its\n"
      "attributes ATTR, like nix-build: evaluates them into kiln's store,\n"
      "builds them with a scheduler and local workers inside this process\n"
      "(in the sandbox; no daemon, no root), shows progress, prints the\n"
      "output paths and makes `result` symlinks (GC roots). Exits 1 with\n"
      "the failing step's last log lines when a build fails. What is\n"
      "already built is not built again.\n\nOptions");
  eval::EvalSettings settings;
  try {
    po::variables_map vm;
    if (int rc = parseArgs(argv, o, opts, vm); rc >= 0) return rc;
    for (auto& i : o.includes) settings.searchPath.push_back(i);
    applyNixEnvironment(settings);
    settings.showTrace = o.showTrace;
    o.target.apply(vm, settings);
  } catch (const po::error& e) {
    std::cerr << "kiln build: " << e.what() << "\nTry 'kiln build --help'.\n";
    return kExitUsage;
  } catch (const Error& e) {
    std::cerr << "kiln build: " << e.what() << "\n";
    return kExitUsage;
  }
  try {
    return build(o, settings);
  } catch (const Error& e) {
    printEvalError(std::cerr, e.what(), o.showTrace);
    return kExitFailure;
  }
}

RegisterCommand reg("build",
                    "evaluate and build derivations here, like nix-build",
                    runBuild);

}  // namespace
}  // namespace kiln::cli
