// Jobset evaluations off the service thread (evaluations.h).
#include "evaluations.h"

#include <filesystem>
#include <utility>

#include "eval_transfer.h"
#include "kiln/common/file.h"
#include "kiln/common/logging.h"
#include "kiln/store/local_store.h"

namespace kiln::scheduler {

Evaluations::Evaluations(Config config, const Clock& clock)
    : config_(std::move(config)), clock_(clock) {}

Evaluations::~Evaluations() {
  if (running_) running_->wait();
}

EvalRunner& Evaluations::runnerOf(const JobsetSpec& js) const {
  if (config_.runner) return *config_.runner;
  auto it = config_.runners.find(js.evaluator);
  if (it != config_.runners.end() && it->second) return *it->second;
  if (!config_.plugins)
    throw Error("jobset '" + js.name + "': no evaluator named '" +
                js.evaluator + "'");
  try {
    return config_.plugins->get(js.evaluator);
  } catch (const Error& e) {
    throw Error("jobset '" + js.name + "': " + e.what());
  }
}

EvalOutcome Evaluations::run(const JobsetRow& js, bool force) const {
  EvalOutcome o;
  o.jobset = js.id;
  auto start = clock_.now();
  o.timeMs = clock_.nowMs();
  try {
    std::string work = config_.stateDir + "/eval/" + std::to_string(js.id);
    JobsetSpec spec = js;  // the plain value, without scheduling state
    Checkout co = config_.fetcher->fetch(spec, work);
    if (co.workDir.empty()) co.workDir = work;
    createDirs(co.workDir);
    o.inputsHash = co.inputsHash;
    if (!force && co.inputsHash == js.lastInputs) {
      o.skipped = true;
      return o;
    }
    o.jobs = runnerOf(spec).evaluate(
        spec, co, EvalStore{config_.stateDir, config_.storeDir});
    // A store handle of this thread: LocalStore is safe across processes
    // and threads, and the service's own instance stays on its thread.
    store::LocalStore evalStore(config_.stateDir,
                                store::StoreDir(config_.storeDir));
    if (config_.prefetch) {
      readClosure(o, evalStore);
      orderJobsByDepth(o.jobs, *o.drvs, evalStore.storeDir());
    }
    o.sources = keepSources(evalStore, co.dir);
  } catch (const std::exception& e) {
    o.error = e.what();
  }
  finished(o, start);
  return o;
}

namespace {

bool notGit(const std::string& path) { return baseNameOf(path) != ".git"; }

// Whether the files under `dir` (without `.git`) hold more than `bound`
// bytes; stops counting once they do.
bool treeOver(const std::string& dir, uint64_t bound) {
  namespace fs = std::filesystem;
  uint64_t bytes = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (!notGit(it->path().string())) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec) && !it->is_symlink(ec))
      bytes += it->file_size(ec);
    if (bytes > bound) return true;
  }
  return false;
}

}  // namespace

// The checkout as a `source` path (what a channel's nixexprs.tar.xz
// holds); "" when it cannot be added or is larger than the bound (logged:
// the evaluation stands).
std::string Evaluations::keepSources(store::LocalStore& store,
                                     const std::string& dir) const {
  if (config_.maxSourceBytes == 0) return "";  // keeping none: nothing to add
  std::string tooLarge = "the evaluated sources of " + dir +
                         " are not kept: they are larger than " +
                         std::to_string(config_.maxSourceBytes) + " bytes";
  try {
    if (treeOver(dir, config_.maxSourceBytes)) {
      logWarn(tooLarge);
      return "";
    }
    auto path = store.addPath(dir, "source", notGit);
    if (store.requirePathInfo(path).narSize > config_.maxSourceBytes) {
      logWarn(tooLarge);
      return "";
    }
    return store.storeDir().printPath(path);
  } catch (const std::exception& e) {
    logWarn("keeping the evaluated sources of " + dir + " failed: " + e.what());
    return "";
  }
}

void Evaluations::finished(EvalOutcome& o, Clock::TimePoint start) const {
  o.durationMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                     clock_.now() - start)
                     .count();
}

void Evaluations::enqueue(const JobsetRow& jobset, bool force,
                          std::optional<int64_t> requestId) {
  queue_.push_back({jobset, force, requestId});
}

std::optional<Evaluations::Finished> Evaluations::takeFinished() {
  if (!running_ ||
      running_->wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return std::nullopt;
  Finished f{running_->get(), std::exchange(runningRequest_, std::nullopt),
             std::exchange(runningResult_, std::nullopt)};
  running_.reset();
  if (f.request) taken_.erase(*f.request);
  return f;
}

bool Evaluations::startQueued() {
  if (queue_.empty()) return false;
  Pending p = std::move(queue_.front());
  queue_.pop_front();
  start(p.jobset, p.force, p.requestId);
  return true;
}

void Evaluations::start(const JobsetRow& js, bool force,
                        std::optional<int64_t> request) {
  if (config_.started) config_.started(js);
  runningRequest_ = request;
  running_ = std::async(std::launch::async,
                        [this, js, force] { return run(js, force); });
}

void Evaluations::startImport(const EvalResultRow& row) {
  runningRequest_ = row.request;
  runningResult_ = row.id;
  running_ =
      std::async(std::launch::async, [this, row] { return import(row); });
}

// What the evaluator host sent is added to the central store as the store
// checks uploads; the jobs are then read as a local evaluation's are.
EvalOutcome Evaluations::import(const EvalResultRow& row) const {
  EvalOutcome o;
  auto start = clock_.now();
  try {
    StateDb db(config_.database, StateDb::Existing{});
    EvalResultReader reader(db, row);
    store::LocalStore central(config_.stateDir,
                              store::StoreDir(config_.storeDir));
    EvalStreamLimits limits;
    limits.maxSourceBytes = config_.maxSourceBytes;
    o = readEvalStream(reader, central, limits);
    finishJobs(o, central);
    logInfo(
        "imported evaluation result " + std::to_string(row.id) + ": " +
        std::to_string(o.jobs.size()) + " jobs, " +
        std::to_string(o.drvs->size()) + " derivations in " +
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                           clock_.now() - start)
                           .count()) +
        " ms");
  } catch (const std::exception& e) {
    o.drvs.reset();
    o.jobs.clear();
    o.skipped = false;
    o.error = "the result of evaluator " + row.evaluator +
              " could not be imported: " + e.what();
    logWarn(o.error);
  }
  o.jobset = row.jobset;
  return o;
}

// The temporary roots protect the jobs' .drvs while they are read.
void Evaluations::readClosure(EvalOutcome& o, store::LocalStore& store) {
  std::vector<std::string> roots;
  for (auto& j : o.jobs) {
    if (!j.error.empty()) continue;
    roots.push_back(j.drvPath);
    store.addTempRoot(store.parsePath(j.drvPath));
  }
  o.drvs = prefetchDrvs(store, roots, o.drvs.get());  // an import's checked
}

// The closure and dependency order as for a local evaluation; a job whose
// .drv is not valid or did not parse gets an error, and its outputs are
// the ones its .drv names.
void Evaluations::finishJobs(EvalOutcome& o, store::LocalStore& store) {
  readClosure(o, store);
  for (auto& j : o.jobs) {
    if (!j.error.empty()) continue;
    auto it = o.drvs->find(j.drvPath);
    if (it == o.drvs->end()) {
      j.error = "its derivation " + j.drvPath +
                " did not arrive valid from the evaluator";
      continue;
    }
    j.outputs.clear();
    for (auto& [name, out] : it->second->outputs)
      if (out.path) j.outputs[name] = store.printPath(*out.path);
  }
  orderJobsByDepth(o.jobs, *o.drvs, store.storeDir());
}

}  // namespace kiln::scheduler
