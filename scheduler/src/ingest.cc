// Ingestion: .drv closures → core steps + step rows (docs/scheduler.md).
#include "kiln/scheduler/ingest.h"

#include <sstream>
#include <unordered_map>
#include <unordered_set>
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

// One derivation met while ingesting a batch.
struct Ingestor::Node {
  enum class Kind {
    kCore,     ///< the core holds its step (`step`)
    kValid,    ///< its outputs are valid: no step
    kFailure,  ///< an unexpired cached failure: a step failed at once
    kNew,      ///< a step to make, after its children's
    kError,    ///< its `.drv` could not be read or checked (`error`)
  };
  Kind kind = Kind::kNew;
  std::shared_ptr<const store::Derivation> drv;
  std::vector<std::string> children;  ///< kNew: its input derivations
  std::optional<StepRow> existing;    ///< kNew, kFailure: its step's row
  std::optional<StepId> step;         ///< once in the core
  int64_t dbId = 0;                   ///< once recorded
  bool planned = false;               ///< in Plan::order
  std::exception_ptr error;
};

// A batch: every derivation met, and the steps to make, dependencies
// first.
struct Ingestor::Plan {
  std::unordered_map<std::string, Node> nodes;
  std::vector<std::string> order;
};

// Resolves the closures of `frontier` a level at a time: in memory what
// the core holds, what has valid outputs and what cannot be read; the
// rest (and the valid ones, whose row a crash may have left open) in one
// lookup per level. A cached failure's inputs are not visited.
void Ingestor::explore(Plan& plan, std::vector<std::string> frontier,
                       int64_t nowMs) {
  while (!frontier.empty()) {
    std::vector<std::string> toLookUp;
    for (auto& path : frontier) {
      auto [it, fresh] = plan.nodes.try_emplace(path);
      if (!fresh) continue;
      Node& n = it->second;
      if (auto s = core_.findStep(path)) {
        refreshFailedStep(*s, path, nowMs);
        n.kind = Node::Kind::kCore;
        n.step = s;
        continue;
      }
      try {
        n.drv = loadDrv(path);
      } catch (const Error&) {
        n.kind = Node::Kind::kError;
        n.error = std::current_exception();
        continue;
      }
      if (outputsValid(*n.drv)) n.kind = Node::Kind::kValid;
      toLookUp.push_back(path);
    }
    auto found = db_.lookUpSteps(toLookUp, nowMs);
    std::vector<std::string> next;
    for (auto& path : toLookUp) {
      Node& n = plan.nodes.at(path);
      StateDb::StepLookup& f = found[path];
      if (n.kind == Node::Kind::kValid) {
        // A scheduler killed after registering the outputs but before the
        // result left the step's row unfinished: it did succeed.
        if (f.step && !f.step->finished)
          db_.finishStep(f.step->id, 0, nowMs, "");
        continue;
      }
      n.existing = std::move(f.step);
      if (f.failure) {
        n.kind = Node::Kind::kFailure;
        continue;
      }
      for (auto& [in, outs] : n.drv->inputDrvs) {
        n.children.push_back(store_.printPath(in));
        next.push_back(n.children.back());
      }
    }
    frontier = std::move(next);
  }
}

// Appends the steps `top` needs that no earlier build of the batch planned
// to plan.order, dependencies first (iterative post-order: deep chains do
// not exhaust the stack). Throws the error of a bad `.drv` it needs, or a
// cycle; the build then plans nothing.
void Ingestor::planBuild(Plan& plan, const std::string& top, IngestResult& r) {
  size_t before = plan.order.size();
  std::unordered_set<std::string> seen, onStack;
  std::vector<std::pair<const std::string*, size_t>> stack;
  auto visit = [&](const std::string& path) {
    if (onStack.count(path))
      throw FormatError("ingestion: dependency cycle through " + path);
    if (!seen.insert(path).second) return;
    Node& n = plan.nodes.at(path);
    if (n.kind == Node::Kind::kError) std::rethrow_exception(n.error);
    if (n.kind == Node::Kind::kValid) r.validDerivations++;
    if (n.planned) return;  // an earlier build of the batch needs it
    if (n.kind == Node::Kind::kFailure) {
      n.planned = true;
      plan.order.push_back(path);
      r.newSteps++;
    } else if (n.kind == Node::Kind::kNew) {
      onStack.insert(path);
      stack.emplace_back(&plan.nodes.find(path)->first, 0);
    }
  };
  try {
    visit(top);
    while (!stack.empty()) {
      auto& [path, next] = stack.back();
      Node& n = plan.nodes.at(*path);
      if (next < n.children.size()) {
        visit(n.children[next++]);  // may grow `stack`
        continue;
      }
      n.planned = true;
      plan.order.push_back(*path);
      r.newSteps++;
      onStack.erase(*path);
      stack.pop_back();
    }
  } catch (...) {
    for (size_t i = before; i < plan.order.size(); i++)
      plan.nodes.at(plan.order[i]).planned = false;
    plan.order.resize(before);
    throw;
  }
}

// The planned steps' rows, dependencies and cached failures: a few
// statements for the whole batch.
void Ingestor::recordPlan(Plan& plan, int64_t nowMs) {
  std::vector<StepRow> rows;
  std::vector<Node*> inserted;
  for (auto& path : plan.order) {
    Node& n = plan.nodes.at(path);
    if (n.existing) {
      n.dbId = n.existing->id;
      if (n.existing->finished) db_.reopenStep(n.dbId);
      continue;
    }
    StepSpec spec = specOf(path, *n.drv);
    StepRow row;
    row.drvPath = path;
    row.system = spec.system;
    row.pname = spec.pname;
    row.features = spec.requiredFeatures;
    row.createdMs = nowMs;
    rows.push_back(std::move(row));
    inserted.push_back(&n);
  }
  auto ids = db_.insertSteps(rows);
  for (size_t i = 0; i < ids.size(); i++) inserted[i]->dbId = ids[i];
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (auto& path : plan.order) {
    Node& n = plan.nodes.at(path);
    if (n.kind == Node::Kind::kFailure)
      db_.finishStep(n.dbId, static_cast<int>(StepStatus::kCachedFailure),
                     nowMs, "cached failure");
    for (auto& c : n.children) {
      Node& child = plan.nodes.at(c);
      if (child.kind == Node::Kind::kCore)
        edges.emplace_back(n.dbId, *index_.dbId(*child.step));
      else if (child.kind != Node::Kind::kValid)
        edges.emplace_back(n.dbId, child.dbId);
    }
  }
  db_.addStepDeps(edges);
}

// The planned steps into the core, dependencies first, once recorded.
void Ingestor::addPlanToCore(Plan& plan) {
  for (auto& path : plan.order) {
    Node& n = plan.nodes.at(path);
    StepSpec spec = specOf(path, *n.drv);
    if (n.existing) spec.created = TimePoint(Duration(n.existing->createdMs));
    std::vector<StepId> deps;
    for (auto& c : n.children)
      if (auto s = plan.nodes.at(c).step) deps.push_back(*s);
    StepId sid = core_.addStep(spec, deps);
    n.step = sid;
    index_.add(sid, n.dbId, n.existing ? n.existing->attempts : 0);
    if (n.kind == Node::Kind::kFailure)
      core_.failStep(sid, StepStatus::kCachedFailure);
  }
}

IngestResult Ingestor::ingest(const std::string& topPath) {
  auto out = ingestAll({topPath});
  if (out[0].error) std::rethrow_exception(out[0].error);
  return out[0].result;
}

std::vector<IngestOutcome> Ingestor::ingestAll(
    const std::vector<std::string>& drvPaths) {
  std::vector<IngestOutcome> out(drvPaths.size());
  // A batch's statements may take longer than the loop's other ones.
  QueryTimeoutAtLeast longer(db_.db(), kIngestQueryTimeout);
  StateDb::Transaction txn(db_);
  int64_t now = clock_.nowMs();
  Plan plan;
  explore(plan, drvPaths, now);
  for (size_t i = 0; i < drvPaths.size(); i++) {
    try {
      planBuild(plan, drvPaths[i], out[i].result);
    } catch (const Error&) {
      out[i] = {IngestResult{}, std::current_exception()};
    }
  }
  recordPlan(plan, now);
  txn.commit();
  addPlanToCore(plan);
  for (size_t i = 0; i < drvPaths.size(); i++)
    if (!out[i].error) out[i].result.top = plan.nodes.at(drvPaths[i]).step;
  return out;
}

}  // namespace kiln::scheduler
