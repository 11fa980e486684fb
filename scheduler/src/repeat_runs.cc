// Reproducibility checks' second builds on the service's side
// (repeat_runs.h).
#include "repeat_runs.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kiln/common/logging.h"
#include "kiln/common/stream.h"
#include "kiln/scheduler/repeat_check.h"
#include "kiln/scheduler/repeat_store.h"
#include "kiln/store/nar.h"

namespace kiln::scheduler {

namespace {

std::pair<uint32_t, uint32_t> key(StepId sid) {
  return {sid.index, sid.generation};
}

// Compares a registered output (a tree in the central store) with the
// second build's NAR: the NAR is unpacked next to itself first, and the
// unpacked tree removed afterwards. Runs on the DiffQueue's thread.
class UnpackingDiffer final : public Differ {
 public:
  explicit UnpackingDiffer(Differ& inner) : inner_(inner) {}
  DiffReport diff(const std::string& first, const std::string& nar) override {
    std::string tree = nar + ".unpacked";
    try {
      if (pathExists(tree)) deletePath(tree);
      AutoCloseFD fd(open(nar.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd) throwSysError("opening " + nar);
      FdSource src(fd.get());
      store::restorePath(tree, src);
    } catch (const std::exception& e) {
      DiffReport r;
      r.text = std::string("unpacking the second build: ") + e.what();
      return r;
    }
    DiffReport r = inner_.diff(first, tree);
    try {
      deletePath(tree);
    } catch (const std::exception& e) {
      logWarn(std::string("removing ") + tree + ": " + e.what());
    }
    return r;
  }

 private:
  Differ& inner_;
};

// One output's part of a check's report.
std::string reportPart(const std::string& output, const DiffReport& r) {
  std::string head = "=== output " + output + ": diffoscope " +
                     diffOutcomeName(r.outcome) +
                     (r.truncated ? " (report cut)" : "") + " ===\n";
  if (r.outcome == DiffReport::Outcome::kSame)
    return head +
           "diffoscope found no difference in the contents (the NAR "
           "hashes differ: metadata such as permissions)\n";
  return head + r.text + (r.text.empty() || r.text.back() == '\n' ? "" : "\n");
}

}  // namespace

std::string repeatSideLocation(const std::string& stateDir, int64_t step) {
  return stateDir + "/repeat-checks/" + std::to_string(step);
}

RepeatRuns::RepeatRuns(const ServiceConfig& config, StateDb& db,
                       DeferredWrites& deferred, store::LocalStore& store,
                       SchedulerCore& core, const Clock& clock,
                       std::shared_ptr<Differ> differ)
    : config_(config),
      db_(db),
      deferred_(deferred),
      store_(store),
      core_(core),
      clock_(clock),
      wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      differ_(std::move(differ)) {
  if (!wake_) throwSysError("creating the reproducibility checks' eventfd");
  if (!differ_) {
    launcher_ = std::make_unique<RealProcessLauncher>();
    differ_ = std::make_shared<DiffoscopeDiffer>(*launcher_);
  }
  unpacking_ = std::make_unique<UnpackingDiffer>(*differ_);
  queue_ = std::make_unique<DiffQueue>(*unpacking_);
}

RepeatRuns::~RepeatRuns() { queue_.reset(); }

void RepeatRuns::restore() {
  for (auto& c : runningRepeatChecks(db_, kMaxListedRepeats))
    if (!c.secondWorker.empty()) wasRunningOn_[c.step] = c.secondWorker;
  size_t again = requeueRunningRepeatChecks(db_);
  auto pending = pendingRepeatChecks(db_, kMaxListedRepeats);
  for (auto& c : pending) add(c.step, c.firstWorker, c.refusedBy);
  if (!pending.empty())
    logInfo(std::to_string(pending.size()) +
            " reproducibility checks wait for their second build (" +
            std::to_string(again) + " were running)");
}

void RepeatRuns::add(int64_t step, const std::string& firstWorker,
                     const std::vector<std::string>& refusedBy) {
  std::optional<StepRow> row;
  try {
    row = db_.step(step);
  } catch (const std::exception& e) {
    logWarn("reproducibility check of step " + std::to_string(step) +
            " waits for the next start: " + e.what());
    return;
  }
  if (!row) return;
  RepeatSpec spec{row->drvPath, row->system, row->features, firstWorker,
                  refusedBy};
  StepId sid = core_.addRepeat(spec);
  bySid_[key(sid)] = {step, std::move(spec)};
}

std::optional<int64_t> RepeatRuns::checkOf(StepId sid) const {
  auto it = bySid_.find(key(sid));
  if (it == bySid_.end()) return std::nullopt;
  return it->second.step;
}

std::vector<std::pair<StepId, int64_t>> RepeatRuns::known() const {
  std::vector<std::pair<StepId, int64_t>> out;
  out.reserve(bySid_.size());
  for (auto& [k, known] : bySid_)
    out.push_back({StepId{k.first, k.second}, known.step});
  std::sort(out.begin(), out.end(),
            [](auto& a, auto& b) { return a.second < b.second; });
  return out;
}

std::optional<StepId> RepeatRuns::adoptable(int64_t step,
                                            const std::string& worker) {
  auto was = wasRunningOn_.find(step);
  if (was == wasRunningOn_.end() || was->second != worker) return std::nullopt;
  return sidOf(step);
}

void RepeatRuns::started(StepId, int64_t step, const std::string& worker) {
  wasRunningOn_.erase(step);
  refusedUntil_.erase(step);
  deferred_.run(
      [&db = db_, step, worker] { startRepeatCheck(db, step, worker); });
}

void RepeatRuns::notSent(StepId sid) {
  auto it = bySid_.find(key(sid));
  if (it == bySid_.end()) return;
  Known known = std::move(it->second);
  bySid_.erase(it);
  core_.finishRepeat(sid);
  StepId again = core_.addRepeat(known.spec);  // waits at the end again
  bySid_[key(again)] = std::move(known);
}

void RepeatRuns::refused(StepId sid, int64_t step, const std::string& worker,
                         const std::string& error, bool holdsSlot) {
  auto it = bySid_.find(key(sid));
  if (it == bySid_.end()) return;
  it->second.spec.refusedBy.push_back(worker);  // for a later addRepeat
  auto refusers = it->second.spec.refusedBy;
  bool waits = config_.refusedCheckWait.count() > 0;
  if (holdsSlot && core_.refuseRepeat(sid)) {
    logInfo("reproducibility check of step " + std::to_string(step) + ": " +
            worker + " holds its outputs, another worker will build it");
  } else if (holdsSlot && !waits) {
    bySid_.erase(it);
    failRefused(step, error);
    return;
  } else {
    // No worker that may build it is known now (or the core cannot say:
    // its slot was given back); one may be about to be (its Hello not
    // read yet, or it is restarting): it waits, bounded.
    if (!holdsSlot) core_.finishRepeat(sid);
    Known known = std::move(it->second);
    bySid_.erase(it);
    StepId again = core_.addRepeat(known.spec);
    bySid_[key(again)] = std::move(known);
    if (waits)
      refusedUntil_[step] = {clock_.now() + config_.refusedCheckWait, error};
    auto sec = std::chrono::duration_cast<std::chrono::seconds>(
        config_.refusedCheckWait);
    logInfo("reproducibility check of step " + std::to_string(step) + ": " +
            worker + " holds its outputs; it waits for another worker" +
            (waits ? " (" + std::to_string(sec.count()) + " s at most)" : ""));
  }
  std::vector<std::string> kept;  // what the table can hold
  for (auto& w : refusers)
    if (kept.size() < kMaxRefusers && !w.empty() && w.size() <= 1000 &&
        w.find('\n') == std::string::npos)
      kept.push_back(w);
  deferred_.run([&db = db_, step, kept = std::move(kept)] {
    waitRepeatCheckAgain(db, step);
    setRepeatCheckRefusedBy(db, step, kept);
  });
}

void RepeatRuns::failRefused(int64_t step, const std::string& error) {
  logInfo("reproducibility check of step " + std::to_string(step) +
          ": no other worker may build it: " + error);
  deferred_.run([&db = db_, step, now = clock_.nowMs(), error] {
    finishRepeatCheck(db, step, false, {}, "", now);
    setRepeatReport(
        db, step,
        "no worker without its outputs could build it again: " + error);
  });
}

void RepeatRuns::expireRefused(Clock::TimePoint now) {
  for (auto it = refusedUntil_.begin(); it != refusedUntil_.end();) {
    if (now < it->second.until) {
      ++it;
      continue;
    }
    int64_t step = it->first;
    std::string error = std::move(it->second.error);
    it = refusedUntil_.erase(it);
    auto sid = sidOf(step);
    if (!sid) continue;
    core_.dropRepeat(*sid);
    bySid_.erase(key(*sid));
    failRefused(step, error);
  }
}

std::optional<StepId> RepeatRuns::sidOf(int64_t step) const {
  for (auto& [k, known] : bySid_)
    if (known.step == step) return StepId{k.first, k.second};
  return std::nullopt;
}

void RepeatRuns::keep(int64_t step, const std::string& output, int nar) {
  std::string dir = repeatSideLocation(config_.stateDir, step);
  createDirs(dir);
  std::string dest = dir + "/" + output + ".nar";
  if (pathExists(dest)) deletePath(dest);
  // The upload's unlinked temporary file gets a name (same file system):
  // no copy on the service thread.
  std::string proc = "/proc/self/fd/" + std::to_string(nar);
  if (linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, dest.c_str(),
             AT_SYMLINK_FOLLOW) == 0)
    return;
  AutoCloseFD out(
      open(dest.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out) throwSysError("creating " + dest);
  FdSource src(nar);
  FdSink sink(out.get());
  char buf[65536];
  while (size_t n = src.read(buf, sizeof buf)) sink.write({buf, n});
  sink.flush();
}

void RepeatRuns::finished(StepId sid, int64_t step,
                          const RepeatOutcome& outcome) {
  bySid_.erase(key(sid));
  core_.finishRepeat(sid);
  std::vector<OutputNarHash> first, second;
  for (auto& [name, path] : outcome.outputs) {
    auto info = store_.queryPathInfo(path);
    if (info) first.push_back({name, info->narHash.to(HashFormat::kNix32)});
  }
  for (auto& [name, hash] : outcome.narHashes) second.push_back({name, hash});
  RepeatVerdict verdict = compareRepeat(first, second);
  std::string side = repeatSideLocation(config_.stateDir, step);
  if (outcome.built && verdict.deterministic) {  // nothing worth keeping
    remover_.remove(side);
    side.clear();
  }
  int64_t now = clock_.nowMs();
  deferred_.run([&db = db_, step, ok = outcome.built, verdict, side, now,
                 error = outcome.error] {
    finishRepeatCheck(db, step, ok, verdict, side, now);
    if (!ok) setRepeatReport(db, step, "the second build failed: " + error);
  });
  if (!outcome.built) {
    logInfo("reproducibility check of step " + std::to_string(step) +
            ": the second build failed: " + outcome.error);
    return;
  }
  logInfo("reproducibility check of step " + std::to_string(step) + ": " +
          (verdict.deterministic
               ? "same NAR hashes"
               : "not deterministic (" +
                     std::to_string(verdict.differing.size()) +
                     " outputs differ)"));
  if (!verdict.deterministic)
    queueReports(step, verdict.differing, outcome.outputs);
}

void RepeatRuns::queueReports(
    int64_t step, const std::vector<std::string>& differing,
    const std::map<std::string, store::StorePath>& outputs) {
  std::string side = repeatSideLocation(config_.stateDir, step);
  Pending& p = pending_[step];
  for (auto& name : differing) {
    auto out = outputs.find(name);
    std::string nar = side + "/" + name + ".nar";
    if (out == outputs.end() || !pathExists(nar)) {
      p.text += "=== output " + name + ": missing from one of the builds ===\n";
      continue;
    }
    bool queued = queue_->submit(
        store_.physicalPath(out->second), nar,
        [this, step, name](DiffReport r) {
          {
            std::lock_guard lock(mu_);
            done_.push_back({step, name, std::move(r)});
          }
          uint64_t one = 1;
          if (::write(wake_.get(), &one, sizeof one) < 0)
            logWarn(std::string("waking the scheduler: ") + strerror(errno));
        });
    if (queued)
      ++p.left;
    else
      p.text += "=== output " + name + ": not compared (queue full) ===\n";
  }
  if (p.left == 0) {
    deferred_.run(
        [&db = db_, step, text = p.text] { setRepeatReport(db, step, text); });
    pending_.erase(step);
  }
}

void RepeatRuns::takeReports() {
  uint64_t n;
  if (::read(wake_.get(), &n, sizeof n) < 0 && errno != EAGAIN)
    logWarn(std::string("reading the checks' eventfd: ") + strerror(errno));
  std::vector<Report> done;
  {
    std::lock_guard lock(mu_);
    done.swap(done_);
  }
  for (auto& d : done) {
    auto it = pending_.find(d.step);
    if (it == pending_.end()) continue;
    it->second.text += reportPart(d.output, d.report);
    if (--it->second.left > 0) continue;
    deferred_.run([&db = db_, step = d.step, text = it->second.text] {
      setRepeatReport(db, step, text);
    });
    pending_.erase(it);
  }
}

void RepeatRuns::pruneWhenDue(Clock::TimePoint now) {
  auto every = config_.repeatPruneInterval;
  if (every.count() <= 0 || (lastPrune_ && now - *lastPrune_ < every)) return;
  lastPrune_ = now;
  std::string root = config_.stateDir + "/repeat-checks/";
  try {
    auto keep = std::chrono::duration_cast<std::chrono::milliseconds>(
        config_.keepRepeatNars);
    auto checks = repeatNarsToPrune(db_, clock_.nowMs(), keep.count(), 100);
    for (auto& c : checks) {
      // Only what this scheduler keeps: a row copied from another farm
      // names another state directory.
      if (c.sideLocation.starts_with(root)) remover_.remove(c.sideLocation);
      deferred_.run([&db = db_, step = c.step] { forgetRepeatNars(db, step); });
    }
    if (!checks.empty())
      logInfo("reproducibility checks: the kept NARs of " +
              std::to_string(checks.size()) + " checks removed");
  } catch (const SqlError& e) {
    logWarn(std::string("pruning the checks' kept NARs: ") + e.what());
  }
}

}  // namespace kiln::scheduler
