// Worker registration, eligibility per step class, heartbeats and loss.

#include <algorithm>

#include "core_impl.h"

namespace kiln::scheduler {

namespace {
bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}
}  // namespace

// A worker serves a class if it has the system (any worker runs
// `builtin`), supports every required feature (mandatory ones count as
// supported) and each of its mandatory features is required.
bool SchedulerCore::Impl::eligible(const WorkerSpec& w,
                                   const StepClass& c) const {
  if (c.system != "builtin" && !contains(w.systems, c.system)) return false;
  for (const auto& f : c.features)
    if (!contains(w.supportedFeatures, f) && !contains(w.mandatoryFeatures, f))
      return false;
  for (const auto& f : w.mandatoryFeatures)
    if (!std::binary_search(c.features.begin(), c.features.end(), f))
      return false;
  return true;
}

void SchedulerCore::Impl::linkWorker(uint32_t w, uint32_t cls) {
  classes[cls].workers.push_back(w);
  classes[cls].freeSlots += workers[w].available();
  workers[w].classes.push_back(cls);
}

// Unlinks a worker whose running steps were already released.
void SchedulerCore::Impl::dropWorker(uint32_t w) {
  Worker& wk = workers[w];
  settleIdleSlots(wk, 0);
  for (uint32_t c : wk.classes) {
    auto& list = classes[c].workers;
    list.erase(std::find(list.begin(), list.end(), w));
    classes[c].freeSlots -= wk.available();
  }
  uint32_t gen = wk.generation + 1;
  wk = Worker{};
  wk.generation = gen;
  freeWorkers.push_back(w);
}

WorkerId SchedulerCore::registerWorker(const WorkerSpec& spec) {
  Impl& m = *impl_;
  if (spec.systems.empty())
    throw SchedulerError("scheduler: worker '" + spec.name +
                         "' announces no system type");
  if (spec.slots == 0)
    throw SchedulerError("scheduler: worker '" + spec.name + "' has no slot");
  if (!(spec.speedFactor > 0))
    throw SchedulerError("scheduler: worker '" + spec.name +
                         "' has a speed factor <= 0");
  m.advance();
  uint32_t w;
  if (!m.freeWorkers.empty()) {
    w = m.freeWorkers.back();
    m.freeWorkers.pop_back();
  } else {
    w = static_cast<uint32_t>(m.workers.size());
    m.workers.emplace_back();
  }
  Worker& wk = m.workers[w];
  wk.alive = true;
  wk.spec = spec;
  wk.lastHeartbeat = m.clock.wallNow();
  for (uint32_t c = 0; c < m.classes.size(); ++c)
    if (m.eligible(wk.spec, m.classes[c])) m.linkWorker(w, c);
  return WorkerId{w, wk.generation};
}

void SchedulerCore::heartbeat(WorkerId id, double load) {
  Impl& m = *impl_;
  m.advance();
  Worker& wk = m.workers[m.resolveWorker(id)];
  if (!(load >= 0))
    throw SchedulerError("scheduler: worker '" + wk.spec.name +
                         "' reported a negative or NaN load");
  wk.reportedLoad = load;
  wk.runningAtHeartbeat = wk.running.size();
  wk.lastHeartbeat = m.clock.wallNow();
}

void SchedulerCore::removeWorker(WorkerId id) {
  Impl& m = *impl_;
  m.advance();
  uint32_t w = m.resolveWorker(id);
  std::vector<uint32_t> running = m.workers[w].running;
  TimePoint now = m.clock.wallNow();
  for (uint32_t idx : running) {
    if (m.steps[idx].repeat) {
      m.requeueRepeat(idx);
      continue;
    }
    Duration took = now - m.steps[idx].startedAt;
    m.endAttempt(idx, StepResult::transient(took));
  }
  m.dropWorker(w);
  ++m.counters.workersRemoved;
}

std::vector<WorkerId> SchedulerCore::workers() const {
  std::vector<WorkerId> out;
  for (uint32_t w = 0; w < impl_->workers.size(); ++w)
    if (impl_->workers[w].alive)
      out.push_back(WorkerId{w, impl_->workers[w].generation});
  return out;
}

std::vector<WorkerId> SchedulerCore::tick() {
  Impl& m = *impl_;
  m.advance();
  std::vector<WorkerId> lost;
  if (m.config.heartbeatTimeout.count() <= 0) return lost;
  TimePoint now = m.clock.wallNow();
  for (uint32_t w = 0; w < m.workers.size(); ++w) {
    const Worker& wk = m.workers[w];
    if (wk.alive && now - wk.lastHeartbeat > m.config.heartbeatTimeout)
      lost.push_back(WorkerId{w, wk.generation});
  }
  for (WorkerId id : lost) removeWorker(id);
  return lost;
}

}  // namespace kiln::scheduler
