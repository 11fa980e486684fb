// The worker daemon: connection, Hello/Welcome/Refused, heartbeats,
// reconnection and shutdown (docs/worker.md, "Daemon").
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "daemon_impl.h"
#include "kiln/common/logging.h"
#include "kiln/common/process.h"

namespace kiln::worker {
namespace {

using namespace std::chrono_literals;
namespace proto = protocol;

bool limitsNeedGroups(const ResourceLimits& l) {
  return l.memoryMaxBytes || l.pidsMax || l.cpuWeight;
}

/// The control groups of the builds: given, or the host's. Throws Error
/// when limits need them and the host has none.
std::shared_ptr<Cgroups> buildCgroups(const DaemonConfig& c) {
  if (c.cgroups || !c.useCgroups) return c.cgroups;
  bool needed = limitsNeedGroups(c.buildLimits) ||
                (c.bigBuildLimits && limitsNeedGroups(*c.bigBuildLimits));
  bool wantCpu = c.buildLimits.cpuWeight ||
                 (c.bigBuildLimits && c.bigBuildLimits->cpuWeight);
  std::string why;
  auto groups = hostCgroups(wantCpu, why);
  if (groups) {
    logInfo("worker: one control group per build, " + groups->describe());
  } else if (needed) {
    throw Error("worker: the build limits need control groups, but " + why +
                " (docs/operations.md, \"Limits per build\")");
  } else {
    logDebug("worker: builds run without control groups: " + why);
  }
  return groups;
}

BuildRunnerConfig runnerConfig(const DaemonConfig& c,
                               const store::LocalStore& s,
                               std::shared_ptr<const Platforms> platforms) {
  BuildRunnerConfig r;
  r.platforms = std::move(platforms);
  r.store = {s.storeDir(), s.physicalRoot(),
             c.storeMountedAtLogical || c.launcherMapsStore};
  r.buildDirParent = c.stateDir + "/build";
  if (auto nice = c.sessionNice ? c.sessionNice : procAutogroupNice())
    r.cpuShares = std::make_shared<CpuShares>(std::move(nice), c.cores);
  r.cgroups = buildCgroups(c);
  return r;
}

std::string joinSystems(const std::vector<std::string>& systems) {
  std::string out;
  for (auto& s : systems) out += (out.empty() ? "" : " ") + s;
  return out;
}

DaemonConfig checked(DaemonConfig c) {
  if (c.stateDir.empty()) throw Error("worker: a state directory is needed");
  if (c.workerId.empty()) c.workerId = hostName();
  if (c.workerId.empty()) c.workerId = "worker";
  createDirs(c.stateDir);
  if (c.cores == 0) c.cores = std::max(1u, std::thread::hardware_concurrency());
  if (!c.schedulers.empty()) c.schedulers = EndpointList::parse(c.schedulers);
  return c;
}

std::string millis(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + " ms";
}

}  // namespace

Daemon::Impl::Impl(Daemon& self_, DaemonConfig config)
    : self(self_),
      cfg(checked(std::move(config))),
      clock(cfg.clock ? *cfg.clock : RealClock::instance()),
      pressure(cfg.pressure ? cfg.pressure
                            : std::shared_ptr<PressureSource>(
                                  procPressureSource("/proc"))),
      store(cfg.stateDir, store::StoreDir(cfg.storeDir)),
      tmpDir(cfg.stateDir + "/tmp"),
      drvDir(cfg.stateDir + "/drvs"),
      sandbox(cfg.launcher ? std::make_shared<UnsandboxedLauncher>(cfg.launcher)
                           : openSandbox(cfg.sandbox, cfg.sandboxOptions)),
      platforms(Platforms::load(cfg.platforms, cfg.platformOptions)),
      runner(runnerConfig(cfg, store, platforms), *sandbox, clock),
      endpoints(cfg.schedulers.empty() ? std::vector{cfg.client.connect}
                                       : cfg.schedulers,
                cfg.client.reconnectMin, cfg.client.reconnectMax),
      helloDelay(cfg.helloRetryMin) {
  if (!cfg.syncStoreFiles)
    store.setContentSync(store::LocalStore::ContentSync::kNone);
  if (!sandbox->mapsStore() && !cfg.storeMountedAtLogical &&
      !cfg.launcherMapsStore &&
      store.storeDir().dir() != store.physicalRoot())
    throw Error("worker: builders write to the logical store " +
                store.storeDir().dir() + " but the worker's store is at " +
                store.physicalRoot() +
                ": use --store-dir " + store.physicalRoot() +
                " or mount the store there (--store-mounted-at-logical)");
  if (cfg.systems.empty()) cfg.systems = platforms->systems();
  if (cfg.systems.empty())
    throw Error(
        "worker: no system to build for (no platform runs one here; "
        "give --systems or --platforms)");
  logInfo("worker: systems " + joinSystems(cfg.systems));
  createDirs(tmpDir);
  createDirs(drvDir);
  createDirs(cfg.stateDir + "/build");
  journal = std::make_unique<UploadJournal>(cfg.stateDir + "/direct");
  restoreJournal();
  eventsWake = AutoCloseFD(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!eventsWake) throwSysError("creating the worker loop's eventfd");
  client = connectCurrent();
  attemptSince = clock.now();
}

std::unique_ptr<proto::ClientTransport> Daemon::Impl::connectCurrent() {
  proto::ClientOptions o = cfg.client;
  o.connect = endpoints.current();
  if (endpoints.size() > 1) logInfo("worker: trying scheduler " + o.connect);
  if (cfg.connector) return cfg.connector(o);
  return std::make_unique<proto::Client>(o);
}

void Daemon::Impl::send(proto::Message&& msg) {
  if (!client) {
    // Between two schedulers: what matters is sent again after the next
    // Welcome (held steps are resumed).
    logDebug("worker: no scheduler to send " +
             proto::messageTypeName(proto::typeOf(msg)) + " to");
    return;
  }
  bool queued = cfg.debug.protocolVersion
                    ? client->sendRaw(proto::encode(msg, cfg.debug.protocolVersion))
                    : client->send(msg);
  if (!queued)
    logWarn("worker: could not queue " + proto::messageTypeName(
                                              proto::typeOf(msg)) +
            " (send queue full)");
}

void Daemon::Impl::sendHello() {
  proto::Hello h;
  h.workerId = cfg.workerId;
  h.storeDir = store.storeDir().dir();
  h.systems = cfg.systems;
  h.supportedFeatures = cfg.supportedFeatures;
  for (auto& f : cfg.mandatoryFeatures)
    if (std::find(h.supportedFeatures.begin(), h.supportedFeatures.end(),
                  f) == h.supportedFeatures.end())
      h.supportedFeatures.push_back(f);
  if (cfg.bigBuildLimits &&
      std::find(h.supportedFeatures.begin(), h.supportedFeatures.end(),
                kBigBuildFeature) == h.supportedFeatures.end())
    h.supportedFeatures.push_back(kBigBuildFeature);
  h.mandatoryFeatures = cfg.mandatoryFeatures;
  h.slots = cfg.slots;
  h.speedFactor = cfg.speedFactor;
  h.storePathCount = store.queryAllValidPaths().size();
  h.kilnVersion = cfg.kilnVersion;
  h.thresholds = cfg.thresholds;
  // A step past its build (uploading, or reporting) holds no slot here:
  // the scheduler adopts it first, without one.
  for (auto& [id, s] : steps)
    if (!s->dropped)
      h.heldSteps.push_back({id, s->msg.drvPath,
                             s->phase == Step::Phase::kUploading ||
                                 s->phase == Step::Phase::kReporting});
  send(std::move(h));
  if (!helloPending) attemptSince = clock.now();
  helloPending = true;
  helloSentAt = clock.now();
}

void Daemon::Impl::checkConnection() {
  if (!client) return checkFailover(false);
  auto refused = client->handshakeError();
  if (!refused.empty()) throw WorkerRefused(refused);
  bool now = client->connected();
  bool lost = !now && wasConnected;
  if (now && !wasConnected) {
    logInfo("worker: connected to " + endpoints.current());
    helloDelay = cfg.helloRetryMin;
    sendHello();
  } else if (lost) {
    logWarn(endpoints.size() > 1
                ? "worker: lost the connection to the scheduler at " +
                      endpoints.current()
                : "worker: lost the connection to the scheduler; "
                  "reconnecting");
    self.welcomed_ = false;
    if (xfer) xfer->abortAll("connection to the scheduler lost");
  }
  wasConnected = now;
  if (endpoints.size() > 1) checkFailover(lost);
  if (!client) return;
  if (now && helloPending &&
      clock.now() - helloSentAt > helloDelay) {
    helloDelay = std::min(helloDelay * 2, cfg.helloRetryMax);
    logWarn("worker: no Welcome yet; saying Hello again");
    sendHello();
  }
}

void Daemon::Impl::checkFailover(bool lost) {
  if (!client) {
    if (clock.now() < connectAt) return;
    client = connectCurrent();
    attemptSince = clock.now();
    return;
  }
  if (lost) return followNext("was lost");
  if (self.welcomed_ && !helloPending) return;
  if (clock.now() - attemptSince < cfg.failoverAfter) return;
  followNext(std::string(wasConnected ? "did not answer Hello"
                                      : "did not accept the connection") +
             " within " + millis(cfg.failoverAfter));
}

void Daemon::Impl::followNext(const std::string& why) {
  std::string from = endpoints.current();
  auto pause = endpoints.next();
  logWarn("worker: scheduler " + from + " " + why +
          "; next: " + endpoints.current() +
          (pause.count() ? " in " + millis(pause) : std::string()));
  // As after a lost connection: the transfers end, the held steps stay
  // for the Hello to the next scheduler, which may adopt them.
  self.welcomed_ = false;
  helloPending = false;
  wasConnected = false;
  if (xfer) xfer->abortAll("left the scheduler at " + from);
  client->dropUnsent();
  client.reset();
  connectAt = clock.now() + pause;
}

void Daemon::Impl::onWelcome(const proto::Welcome& w) {
  logInfo("worker: welcomed by scheduler " + w.schedulerId);
  logInfo("worker: following scheduler " + endpoints.current());
  endpoints.answered();
  helloPending = false;
  // The old connection's transfers end first, while nothing is sent: a
  // step whose upload is cut short keeps its build for the scheduler.
  self.welcomed_ = false;
  if (xfer) xfer->abortAll("new connection");
  self.welcomed_ = true;
  heartbeatEvery = std::chrono::milliseconds(w.heartbeatIntervalMs);
  chunkSize = w.chunkSize;
  proto::TransferOptions opts;
  opts.chunkSize = chunkSize;
  opts.clock = &clock;
  // One input at a time, in the order asked for (references first), so
  // every reference is valid when a path is added.
  opts.maxActiveIncoming = 1;
  xfer = std::make_unique<proto::TransferEndpoint>(
      [this](proto::Message&& m) { send(std::move(m)); },
      [this](const proto::TransferHeader& h, bool upload) {
        return acceptInput(h, upload);
      },
      [this](const proto::TransferOutcome& o) { onInputReceived(o); }, opts);
  // The steps the scheduler adopted go on (their results and outputs are
  // sent again if the old connection lost them); the others are dropped:
  // the scheduler queued them again.
  reconcile(w.adoptedSteps);
  sendHeartbeat();
}

void Daemon::Impl::sendHeartbeat() {
  proto::Heartbeat hb;
  double load[1] = {0};
  if (getloadavg(load, 1) == 1 && load[0] >= 0) hb.load = load[0];
  struct statvfs st {};
  if (statvfs(cfg.stateDir.c_str(), &st) == 0)
    hb.freeDiskBytes = uint64_t(st.f_bavail) * st.f_frsize;
  for (auto& [id, s] : steps)
    if (s->phase != Step::Phase::kReporting && !s->dropped)
      hb.runningSteps.push_back(id);
  MachinePressure p = pressure->read();
  hb.memoryPressure = p.memory;
  hb.cpuPressure = p.cpu;
  hb.ioPressure = p.io;
  hb.freeMemoryBytes = p.freeMemory;
  send(std::move(hb));
  lastHeartbeat = clock.now();
}

void Daemon::Impl::handle(const proto::Message& msg) {
  if (auto* w = std::get_if<proto::Welcome>(&msg)) return onWelcome(*w);
  if (auto* r = std::get_if<proto::Refused>(&msg))
    throw WorkerRefused("the scheduler refused this worker: " + r->reason);
  if (auto* b = std::get_if<proto::Bye>(&msg)) {
    logWarn("worker: scheduler said Bye: " + b->reason);
    // A Bye while our Hello is unanswered answers a message queued before
    // that Hello (e.g. while reconnecting to a restarted scheduler): a
    // second Hello would make the scheduler replace this worker and retry
    // the steps it had just sent.
    if (helloPending) return;
    self.welcomed_ = false;
    if (xfer) xfer->abortAll("scheduler said Bye");
    return sendHello();
  }
  if (auto* s = std::get_if<proto::BuildStep>(&msg)) return onBuildStep(*s);
  if (auto* c = std::get_if<proto::CancelStep>(&msg)) return onCancel(*c);
  if (auto* g = std::get_if<proto::StageGrant>(&msg)) return onStageGrant(*g);
  if (xfer && xfer->handle(msg)) return;
  if (auto* a = std::get_if<proto::Ack>(&msg)) return onAck(*a);
  logWarn("worker: ignoring unexpected " +
          proto::messageTypeName(proto::typeOf(msg)));
}

void Daemon::Impl::loop() {
  while (!self.stop_.load()) turn();
}

void Daemon::Impl::turn() {
  if (auto m = receive()) {
    try {
      handle(*m);
    } catch (const WorkerRefused&) {
      throw;
    } catch (const std::exception& e) {
      logError(std::string("worker: handling a message: ") + e.what());
    }
  }
  drainEvents();
  checkConnection();
  if (self.welcomed_ && clock.now() - lastHeartbeat >= heartbeatEvery)
    sendHeartbeat();
  if (xfer) xfer->expireIdle();
}

std::optional<proto::Message> Daemon::Impl::receive() {
  if (client) return client->receive(20ms, eventsWake.get());
  // Pausing between two rounds of the schedulers: only the step threads
  // and stop() can wake the loop.
  pollfd wake{eventsWake.get(), POLLIN, 0};
  (void)::poll(&wake, 1, 20);
  return std::nullopt;
}

void Daemon::Impl::shutdown(const std::string& why) {
  for (auto& [id, s] : steps) s->cancel.cancel(proto::StepStatus::kAborted);
  for (auto& [id, s] : steps)
    if (s->thread.joinable()) s->thread.join();
  {
    std::lock_guard lock(eventsMutex);
    events.clear();
  }
  if (xfer) xfer->abortAll(why);
  if (!self.welcomed_) return;
  for (auto& [id, s] : steps)
    if (s->phase != Step::Phase::kReporting)
      finish(*s, proto::StepStatus::kAborted, "worker stopped: " + why);
  send(proto::Bye{why});
}

Daemon::Daemon(DaemonConfig config)
    : impl_(std::make_unique<Impl>(*this, std::move(config))),
      wakeFd_(impl_->eventsWake.get()) {}

void Daemon::turn() { impl_->turn(); }

void Daemon::stop() {
  stop_.store(true);
  // Only write(2): this runs in signal handlers. The loop would see the
  // flag within its 20 ms receive anyway; this ends the wait now.
  uint64_t one = 1;
  if (wakeFd_ >= 0) (void)!::write(wakeFd_, &one, sizeof one);
}

Daemon::~Daemon() {
  if (impl_) impl_->shutdown("worker destroyed");
}

void Daemon::run() {
  try {
    impl_->loop();
  } catch (const WorkerRefused& e) {
    impl_->shutdown(e.what());
    throw;
  }
  impl_->shutdown("worker stopping");
}

}  // namespace kiln::worker
