// Ingestion: .drv closures → core steps + step rows (docs/scheduler.md).
#include "kiln/scheduler/ingest.h"

#include <sstream>
#include <vector>

namespace kiln::scheduler {

void StepIndex::add(StepId core, int64_t db, int64_t attempts) {
  toDb_[core] = db;
  toCore_[db] = core;
  attempts_[db] = attempts;
}

void StepIndex::erase(StepId core) {
  auto it = toDb_.find(core);
  if (it == toDb_.end()) return;
  toCore_.erase(it->second);
  attempts_.erase(it->second);
  toDb_.erase(it);
}

int64_t StepIndex::attempts(int64_t db) const {
  auto it = attempts_.find(db);
  return it == attempts_.end() ? 0 : it->second;
}

void StepIndex::countAttempt(int64_t db) {
  if (auto it = attempts_.find(db); it != attempts_.end()) ++it->second;
}

std::optional<int64_t> StepIndex::dbId(StepId core) const {
  auto it = toDb_.find(core);
  if (it == toDb_.end()) return std::nullopt;
  return it->second;
}

std::optional<StepId> StepIndex::coreId(int64_t db) const {
  auto it = toCore_.find(db);
  if (it == toCore_.end()) return std::nullopt;
  return it->second;
}

Ingestor::Ingestor(StateDb& db, store::LocalStore& store, SchedulerCore& core,
                   const Clock& clock)
    : db_(db),
      store_(store),
      core_(core),
      clock_(clock),
      drvHashes_(store.storeDir(),
                 store::fileDrvLoader(store.storeDir(), store.physicalRoot())) {
}

std::shared_ptr<const store::Derivation> Ingestor::loadDrv(
    const std::string& drvPath) {
  if (prefetched_)
    if (auto it = prefetched_->find(drvPath); it != prefetched_->end())
      return it->second;  // checked valid when the evaluation ended
  if (auto it = loaded_.find(drvPath); it != loaded_.end()) return it->second;
  std::shared_ptr<const store::Derivation> drv;
  try {
    drv = std::make_shared<const store::Derivation>(
        readCheckedDrv(store_, drvHashes_, store_.parsePath(drvPath)));
  } catch (const store::InvalidPathError& e) {
    throw store::InvalidPathError(std::string("ingestion: ") + e.what());
  } catch (const FormatError& e) {
    throw FormatError(std::string("ingestion: ") + e.what());
  }
  loaded_.emplace(drvPath, drv);
  return drv;
}

void Ingestor::useDrvs(std::shared_ptr<const DrvMap> drvs) {
  prefetched_ = std::move(drvs);
  loaded_.clear();
}

bool Ingestor::outputsValid(const store::Derivation& drv) {
  for (auto& [name, out] : drv.outputs)
    if (!out.path || !store_.isValid(*out.path)) return false;
  return !drv.outputs.empty();
}

StepSpec Ingestor::specOf(const std::string& drvPath,
                          const store::Derivation& drv) {
  StepSpec s;
  s.drvPath = drvPath;
  s.system = drv.platform;
  auto f = drv.env.find("requiredSystemFeatures");
  if (f != drv.env.end()) {
    std::istringstream in(f->second);
    for (std::string w; in >> w;) s.requiredFeatures.push_back(w);
  }
  for (auto& [name, out] : drv.outputs) s.outputs.push_back(name);
  auto p = drv.env.find("pname");
  s.pname = p != drv.env.end() ? p->second : drv.name;
  return s;
}

StepId Ingestor::addStepRow(const std::string& drvPath,
                            const store::Derivation& drv,
                            const std::vector<StepId>& deps,
                            const std::optional<StepRow>& existing) {
  StepSpec spec = specOf(drvPath, drv);
  StepRow row;
  row.drvPath = drvPath;
  row.system = spec.system;
  row.pname = spec.pname;
  row.features = spec.requiredFeatures;
  row.createdMs = clock_.nowMs();
  int64_t id = existing ? existing->id : db_.upsertStep(row);
  if (existing && existing->finished) db_.reopenStep(id);
  if (existing) spec.created = TimePoint(Duration(existing->createdMs));
  for (auto d : deps) db_.addStepDep(id, *index_.dbId(d));
  StepId sid = core_.addStep(spec, deps);
  index_.add(sid, id, existing ? existing->attempts : 0);
  return sid;
}

// A step the core still holds as failed (its failed builds stay for a
// revival) is needed by a new build: it is treated as a fresh ingestion
// would treat it. With an unexpired cached failure the core's status
// becomes 8, so the new build fails with 8 and its dependents with 2
// (earlier builds keep the status they finished with; the step row keeps
// the real failure). Without one (cleared or expired) it is queued again.
void Ingestor::refreshFailedStep(StepId step, const std::string& drvPath,
                                 int64_t nowMs) {
  if (core_.step(step).state != StepView::State::kFailed) return;
  if (db_.cachedFailure(drvPath, nowMs)) {
    core_.failStep(step, StepStatus::kCachedFailure);
    return;
  }
  core_.restartStep(step);
  if (auto id = index_.dbId(step)) db_.reopenStep(*id);
}

// One derivation being expanded: its parsed form and the children still to
// visit (iterative post-order, so deep chains do not exhaust the stack).
struct Ingestor::Frame {
  std::string drvPath;
  std::shared_ptr<const store::Derivation> drv;
  std::vector<std::string> children;
  size_t next = 0;
  std::optional<StepRow> existing;  ///< its step's row, if recorded
};

IngestResult Ingestor::ingest(const std::string& topPath) {
  IngestResult r;
  StateDb::Transaction txn(db_);
  // Per derivation: its step, or nullopt when its outputs are valid.
  std::map<std::string, std::optional<StepId>> done;
  std::vector<Frame> stack;
  int64_t now = clock_.nowMs();

  // Resolves `drvPath` without descending, if possible; else pushes a frame.
  auto enter = [&](const std::string& drvPath) {
    if (done.count(drvPath)) return;
    if (auto s = core_.findStep(drvPath)) {
      refreshFailedStep(*s, drvPath, now);
      done[drvPath] = *s;
      return;
    }
    auto drv = loadDrv(drvPath);
    if (outputsValid(*drv)) {
      // A scheduler killed after registering the outputs but before the
      // result left the step's row unfinished: it did succeed.
      if (auto row = db_.stepByDrv(drvPath); row && !row->finished)
        db_.finishStep(row->id, 0, now, "");
      done[drvPath] = std::nullopt;
      r.validDerivations++;
      return;
    }
    auto found = db_.lookUpStep(drvPath, now);
    if (found.failure) {
      StepId s = addStepRow(drvPath, *drv, {}, found.step);
      r.newSteps++;
      db_.finishStep(*index_.dbId(s),
                     static_cast<int>(StepStatus::kCachedFailure), now,
                     "cached failure");
      core_.failStep(s, StepStatus::kCachedFailure);
      done[drvPath] = s;
      return;
    }
    Frame f{drvPath, std::move(drv), {}, 0, std::move(found.step)};
    for (auto& [in, outs] : f.drv->inputDrvs)
      f.children.push_back(store_.printPath(in));
    stack.push_back(std::move(f));
  };

  enter(topPath);
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.next < f.children.size()) {
      std::string child = f.children[f.next++];
      for (auto& g : stack)
        if (g.drvPath == child)
          throw FormatError("ingestion: dependency cycle through " + child);
      enter(child);  // may invalidate `f`
      continue;
    }
    std::vector<StepId> deps;
    for (auto& c : f.children)
      if (auto s = done.at(c)) deps.push_back(*s);
    StepId s = addStepRow(f.drvPath, *f.drv, deps, f.existing);
    r.newSteps++;
    done[f.drvPath] = s;
    stack.pop_back();
  }
  txn.commit();
  r.top = done.at(topPath);
  return r;
}

}  // namespace kiln::scheduler
