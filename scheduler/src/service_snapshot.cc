// SchedulerService's snapshot (docs/scheduler.md, "Snapshot"): what the
// web pages and /metrics read, made from memory after the turns that
// changed it, and stored in PostgreSQL for front ends on other hosts.
#include "kiln/common/logging.h"
#include "kiln/scheduler/service.h"
#include "kiln/scheduler/snapshot_store.h"
#include "service_impl.h"

namespace kiln::scheduler {

namespace {

// What a snapshot shows changes with these counts (besides the clock and
// the workers' last-seen stamps): a key that differs from the published
// one's means the published snapshot is out of date.
std::vector<uint64_t> snapshotKey(const SchedulerMetrics& m) {
  std::vector<uint64_t> k = {
      m.runningSteps,   m.waitingSteps,   m.backoffSteps, m.failedSteps,
      m.builds,         m.workers,        m.freeSlots,    m.dispatchDecisions,
      m.retries,        m.stepsSucceeded, m.stepsFailed,  m.workersRemoved,
      m.waitingRepeats, m.runningRepeats};
  for (auto& [system, n] : m.queuedBySystem) k.push_back(n);
  return k;
}

}  // namespace

// Republished at the end of every turn that changed what it shows, unless
// the last one is younger than 50 times what making it took (a big queue
// under a stream of results): then at the first turn after that, so the
// snapshot costs the loop at most 2 % of its time. A snapshot that
// only grew old (last-seen stamps) is renewed when read, once per
// kSnapshotInterval.
void SchedulerService::Impl::maybePublishSnapshot(const SchedulerMetrics& m) {
  auto age = clock.now() - lastSnapshot;
  if (snapshotDirty || snapshotKey(m) != publishedKey) {
    if (age < std::min<Clock::Duration>(SchedulerService::kSnapshotInterval,
                                        50 * snapshotCost))
      return;
  } else if (!snapshotWanted.load() ||
             age < SchedulerService::kSnapshotInterval) {
    return;
  }
  publishSnapshot(m);
}

namespace {

// What the queue says of a publisher that has outputs waiting.
std::string publishingReason(const CachePublisherStatus& st) {
  std::string r = std::to_string(st.waiting) +
                  " built outputs wait to be published to " + st.uri;
  if (!st.lastError.empty())
    r += ": the cache fails (" + std::to_string(st.failures) +
         " attempts so far): " + st.lastError;
  return r;
}

}  // namespace

// From memory (the index and the core), not the database: the snapshot
// is made after every turn that changed it. A failed step's record is
// finished; it is not listed.
std::vector<QueueEntry> SchedulerService::Impl::queueEntries() {
  static const char* names[] = {"waiting", "queued", "running", "backoff",
                                "failed"};
  std::vector<QueueEntry> out;
  out.reserve(ingestor.index().size() + 1);
  // Outputs waiting for the farm's binary cache head the queue (step 0,
  // state "publishing"), so `kiln queue` and the dashboard say why.
  if (publisher) {
    auto st = publisher->status();
    if (st.waiting > 0 || !st.lastError.empty())
      out.push_back({0, "", "", "publishing", publishingReason(st)});
  }
  for (auto& [id, sid] : ingestor.index().byDbId()) {
    auto v = core.step(sid);
    if (v.state == StepView::State::kFailed) continue;
    out.push_back({id, std::move(v.drvPath), std::move(v.system),
                   names[static_cast<int>(v.state)],
                   core.whyWaiting(sid).detail});
  }
  // Reproducibility checks after the builds' steps, their state prefixed
  // "check-" (`kiln queue` lists them in a section of their own).
  for (auto& [sid, check] : repeats.known()) {
    auto v = core.step(sid);
    out.push_back({check, std::move(v.drvPath), std::move(v.system),
                   std::string("check-") + names[static_cast<int>(v.state)],
                   core.whyWaiting(sid).detail});
  }
  return out;
}

std::vector<QueueEntry> SchedulerService::queue() const {
  return impl_->queueEntries();
}

// Never throws: it runs inside a worker's Hello and a request's answer,
// which must go on; a failure keeps the previous snapshot, logged.
void SchedulerService::Impl::publishSnapshot(const SchedulerMetrics& m) {
  auto start = clock.now();
  auto snap = std::make_shared<SchedulerSnapshot>();
  try {
    snap->queue = queueEntries();
  } catch (const std::exception& e) {
    logError(std::string("scheduler snapshot: ") + e.what());
    lastSnapshot = clock.now();  // tried again in a second
    snapshotCost = SchedulerService::kSnapshotInterval;
    return;
  }
  snapshotWanted = false;
  snapshotDirty = false;
  publishedKey = snapshotKey(m);
  snap->takenMs = clock.nowMs();
  auto activity = steps.activityByPeer();
  for (auto& [peer, c] : link.connections()) {
    auto& a = activity[peer];
    snap->workers.push_back({c.name, c.hello.systems, c.hello.slots,
                             a.running.size(), c.hello.supportedFeatures,
                             a.running, c.lastSeenMs, a.succeeded, a.failed,
                             core.pressure(c.wid),
                             c.heartbeat ? healthText(*c.heartbeat) : ""});
  }
  snap->metrics = m;
  snap->dispatches = metrics.dispatchCount();
  snap->dispatchLatencySum = metrics.dispatchLatencySum();
  *published.lock() = std::move(snap);
  lastSnapshot = clock.now();
  snapshotCost = lastSnapshot - start;
}

void SchedulerService::Impl::storeSnapshotForFrontEnds() {
  // Front ends on other hosts (kiln web) read it from PostgreSQL; on
  // SQLite the web runs in this process and reads `published`.
  if (db.dialect() != SqlDialect::kPostgres) return;
  auto snap = *published.lock();
  if (!snap) return;
  try {
    // An unchanged snapshot is only vouched for again.
    storeSnapshot(db, snap == storedSnapshot ? nullptr : snap.get(),
                  clock.nowMs());
    storedSnapshot = snap;
  } catch (const SqlError& e) {
    if (!e.transient())
      logWarn(std::string("storing the snapshot: ") + e.what());
  }
}

std::shared_ptr<const SchedulerSnapshot> SchedulerService::snapshot() const {
  impl_->snapshotWanted = true;
  return *impl_->published.lock();
}

}  // namespace kiln::scheduler
