// Placement by what workers report about their machines: pressure
// thresholds (a worker over one takes no new step) and memory (a step goes
// only where its package's last peak, or more than where it ran out of
// memory, fits). See docs/scheduler.md, "Pressure" and "Memory".

#include <algorithm>
#include <cstdio>

#include "core_impl.h"
#include "kiln/common/byte_size.h"

namespace kiln::scheduler {

namespace {

// "42%", "42.5%": one decimal at most.
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  std::string s = buf;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0)
    s.resize(s.size() - 2);
  return s;
}

std::string overPercent(const char* what, const std::optional<double>& value,
                        const std::optional<double>& limit) {
  if (!value || !limit || !(*value > *limit)) return "";
  return std::string(what) + " pressure " + number(*value) + "% > " +
         number(*limit) + "%";
}

// The first threshold the health breaches, in a fixed order, or empty.
std::string breach(const PressureLimits& l, const WorkerHealth& h) {
  std::string why =
      overPercent("memory", h.memoryPressure, l.maxMemoryPressure);
  if (why.empty()) why = overPercent("CPU", h.cpuPressure, l.maxCpuPressure);
  if (why.empty()) why = overPercent("IO", h.ioPressure, l.maxIoPressure);
  if (why.empty() && h.loadAverage && l.maxLoadAverage &&
      *h.loadAverage > *l.maxLoadAverage)
    why = "load average " + number(*h.loadAverage) + " > " +
          number(*l.maxLoadAverage);
  if (why.empty() && h.freeDisk && l.minFreeDisk &&
      *h.freeDisk < *l.minFreeDisk)
    why = "free disk " + formatByteSize(*h.freeDisk) + " < " +
          formatByteSize(*l.minFreeDisk);
  return why;
}

}  // namespace

void SchedulerCore::Impl::setPressure(uint32_t w, std::string why) {
  Worker& wk = workers[w];
  if (wk.pressure.empty() == why.empty()) {
    wk.pressure = std::move(why);  // the same state; the value may differ
    return;
  }
  size_t slots = wk.free();
  bool pausing = !why.empty();
  wk.pressure = std::move(why);
  for (uint32_t c : wk.classes) {
    if (pausing)
      classes[c].freeSlots -= slots;
    else
      classes[c].freeSlots += slots;
  }
}

uint64_t SchedulerCore::Impl::memoryNeed(const Step& s) const {
  uint64_t need = s.oomNeed;
  if (auto it = peaks.find(s.pname); it != peaks.end())
    need = std::max(need, it->second);
  return need;
}

std::optional<uint64_t> SchedulerCore::Impl::freeMemory(const Worker& w) const {
  if (!w.health.freeMemory) return std::nullopt;
  uint64_t reported = *w.health.freeMemory;
  return reported > w.memorySent ? reported - w.memorySent : 0;
}

bool SchedulerCore::Impl::memoryGated(const Step& s, uint64_t need) const {
  if (need == 0) return false;
  for (uint32_t w : classes[s.cls].workers) {
    const auto& free = workers[w].health.freeMemory;
    if (free && *free >= need) return true;
  }
  return false;
}

bool SchedulerCore::Impl::fitsMemory(const Worker& w, uint64_t need) const {
  auto free = freeMemory(w);
  return free && *free >= need;
}

void SchedulerCore::Impl::notePeak(Step& s, const StepResult& result) {
  if (result.peakMemoryBytes > 0 && !s.pname.empty())
    peaks[s.pname] = result.peakMemoryBytes;
  if (!result.outOfMemory) return;
  // More than the worker it ran out of memory on had free (and than the
  // peak it reached), where such a worker exists.
  uint64_t had = s.sentWithFree.value_or(0);
  s.oomNeed = std::max({s.oomNeed, had + 1, result.peakMemoryBytes});
}

WaitReason SchedulerCore::Impl::memoryPlacement(const Step& s,
                                                uint64_t need) const {
  std::string who;
  for (uint32_t w : classes[s.cls].workers) {
    const Worker& wk = workers[w];
    auto free = freeMemory(wk);
    who += (who.empty() ? "" : ", ") + wk.spec.name + " " +
           (free ? formatByteSize(*free) : std::string("unknown")) + " free" +
           (wk.free() == 0 ? ", busy" : "") +
           (wk.pressure.empty() ? "" : ", " + wk.pressure);
  }
  return {WaitReason::Kind::kNeedsMemory,
          "needs " + formatByteSize(need) + " of free memory (" + who + ")",
          0,
          {}};
}

WaitReason SchedulerCore::Impl::pressurePlacement(const StepClass& c) const {
  std::string why;
  for (uint32_t w : c.workers) {
    const Worker& wk = workers[w];
    if (wk.free() == 0 || wk.pressure.empty()) continue;
    why += (why.empty() ? "" : "; ") + ("worker " + wk.spec.name + ": ") +
           wk.pressure;
  }
  return {WaitReason::Kind::kWorkersUnderPressure, why, 0, {}};
}

void SchedulerCore::setHistoricalPeak(const std::string& pname,
                                      uint64_t bytes) {
  if (pname.empty() || bytes == 0) return;
  impl_->peaks[pname] = bytes;
}

void SchedulerCore::heartbeat(WorkerId id, double load,
                              const WorkerHealth& health) {
  heartbeat(id, load);  // validates and advances
  Impl& m = *impl_;
  uint32_t w = m.resolveWorker(id);
  Worker& wk = m.workers[w];
  wk.health = health;
  wk.memorySent = 0;
  m.setPressure(w, breach(wk.spec.limits, health));
}

std::string SchedulerCore::pressure(WorkerId id) const {
  return impl_->workers[impl_->resolveWorker(id)].pressure;
}

}  // namespace kiln::scheduler
