// SchedulerService: the worker side of the protocol — Hello, heartbeats,
// BuildStep dispatch, input transfers, output uploads, logs, results
// (docs/protocol.md, docs/scheduler.md). No exception leaves handle().
#include <fcntl.h>
#include <unistd.h>

#include "kiln/common/fail_point.h"
#include "kiln/common/logging.h"
#include "kiln/store/nar.h"
#include "kiln/scheduler/logs.h"
#include "service_impl.h"

namespace kiln::scheduler {

namespace proto = protocol;

namespace {

// Creates `tmp` exclusively and unlinks it at once: the file lives only as
// long as the descriptor (nothing is left behind on any failure).
AutoCloseFD openUnlinkedTemp(const std::string& tmp) {
  AutoCloseFD fd(open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) throwSysError("creating " + tmp);
  unlink(tmp.c_str());
  return fd;
}

// The NAR of a store path, serialised at the first read (when the worker
// grants credit, at most a few transfers per worker at once) rather than
// when it is asked for: a request for hundreds of inputs then costs the
// service thread nothing up front. Small NARs are held in memory, larger
// ones in an unlinked temporary file.
class LazyNarSource final : public Source {
 public:
  static constexpr uint64_t kInMemoryLimit = 1 << 20;
  LazyNarSource(std::string storePath, uint64_t narSize, std::string tmp)
      : storePath_(std::move(storePath)), narSize_(narSize), tmp_(std::move(tmp)) {}
  size_t read(char* data, size_t len) override {
    if (!src_) open();
    return src_->read(data, len);
  }

 private:
  void open() {
    if (narSize_ <= kInMemoryLimit) {
      StringSink sink;
      store::dumpPath(storePath_, sink);
      nar_ = std::move(sink.s);
      src_ = std::make_unique<StringSource>(nar_);
      return;
    }
    fd_ = openUnlinkedTemp(tmp_);
    FdSink sink(fd_.get());
    store::dumpPath(storePath_, sink);
    sink.flush();
    if (lseek(fd_.get(), 0, SEEK_SET) < 0) throwSysError("lseek " + tmp_);
    src_ = std::make_unique<FdSource>(fd_.get());
  }

  std::string storePath_;
  uint64_t narSize_;
  std::string tmp_;
  std::string nar_;
  AutoCloseFD fd_;
  std::unique_ptr<Source> src_;
};

// An uploaded output: written to a temporary file and, once the endpoint
// verified its NAR hash, handed to the registrar (addFromNar verifies it
// once more before registering).
class UploadTarget final : public proto::TransferTarget {
 public:
  using OnCommit = std::function<void(const proto::TransferHeader&,
                                      store::ValidPathInfo, AutoCloseFD)>;
  UploadTarget(std::string tmp, std::optional<store::StorePath> deriver,
               OnCommit onCommit)
      : tmp_(std::move(tmp)),
        deriver_(std::move(deriver)),
        onCommit_(std::move(onCommit)) {
    fd_ = openUnlinkedTemp(tmp_);
  }
  void write(std::string_view data) override { writeAll(fd_.get(), data); }
  void commit(const proto::TransferHeader& h) override {
    if (lseek(fd_.get(), 0, SEEK_SET) < 0) throwSysError("lseek " + tmp_);
    store::ValidPathInfo info = proto::toValidPathInfo(h.info);
    info.deriver = deriver_;  // the step's .drv, whatever the worker says
    info.ultimate = true;
    onCommit_(h, std::move(info), std::move(fd_));
  }
  void discard(const std::string&) noexcept override { fd_.reset(); }

 private:
  std::string tmp_;
  std::optional<store::StorePath> deriver_;
  OnCommit onCommit_;
  AutoCloseFD fd_;
};

bool isTransient(proto::StepStatus s) {
  return s == proto::StepStatus::kAborted ||
         s == proto::StepStatus::kCancelled;
}

// Finishes step row `id` (with its cached failure, if any) in one
// transaction, between the step-finish fail points.
void finishStepRow(StateDb& db, int64_t id, int status, int64_t nowMs,
                   const std::string& error,
                   const std::optional<CachedFailureRow>& cached) {
  SqliteTxn txn(db.db());
  db.finishStep(id, status, nowMs, error);
  if (cached) db.addCachedFailure(*cached);
  KILN_FAIL_POINT("scheduler.step-finish.before-commit");
  txn.commit();
  KILN_FAIL_POINT("scheduler.step-finish.after-commit");
}

}  // namespace

void SchedulerService::Impl::sendTo(const std::string& peer,
                                    proto::Message&& m) {
  if (!server->send(peer, m))
    logWarn("could not send to worker " + peer + " (gone or queue full)");
}

void SchedulerService::Impl::handle(const proto::Received& r) {
  try {
    if (auto* h = std::get_if<proto::Hello>(&r.msg)) {
      onHello(r.peer, r.user, *h);
      return;
    }
    auto it = conns.find(r.peer);
    if (it == conns.end()) {
      // A worker we do not know (e.g. after a scheduler restart or after it
      // was declared lost): it must introduce itself again.
      if (!std::holds_alternative<proto::Bye>(r.msg))
        sendTo(r.peer, proto::Bye{"unknown worker: send Hello again"});
      return;
    }
    Conn& c = it->second;
    if (c.xfer->handle(r.msg)) return;
    std::visit(
        [&](auto& m) {
          using T = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<T, proto::Heartbeat>) {
            core.heartbeat(c.wid, m.load / double(c.hello.slots));
          } else if constexpr (std::is_same_v<T, proto::NeedPaths>) {
            onNeedPaths(c, m);
          } else if constexpr (std::is_same_v<T, proto::LogChunk>) {
            onLog(c, m);
          } else if constexpr (std::is_same_v<T, proto::StepResult>) {
            onResult(c, m);
          } else if constexpr (std::is_same_v<T, proto::Bye>) {
            dropWorker(r.peer, "said bye: " + m.reason, true);
          } else {
            logWarn("worker " + c.name + " sent an unexpected message");
          }
        },
        r.msg);
  } catch (const std::exception& e) {
    logError("handling a message from worker " + r.peer + ": " + e.what());
  }
}

void SchedulerService::Impl::onHello(const std::string& peer,
                                     const std::string& user,
                                     const proto::Hello& h) {
  auto refuse = [&](const std::string& why) {
    logWarn("refusing worker " + h.workerId + ": " + why);
    sendTo(peer, proto::Refused{proto::kProtocolVersion, why});
  };
  if (h.protocolVersion != proto::kProtocolVersion)
    return refuse(proto::versionMismatchText(proto::kProtocolVersion,
                                             h.protocolVersion));
  if (h.storeDir != store.storeDir().dir())
    return refuse("store directory mismatch: the scheduler uses " +
                  store.storeDir().dir() + ", this worker " + h.storeDir);
  if (auto known = conns.find(peer); known != conns.end()) {
    // The same connection says Hello again (it took a Bye meant for a
    // message sent before its Hello, or missed our Welcome). The worker
    // keeps its steps across Hellos, so the scheduler keeps them too and
    // only repeats the Welcome; a changed description replaces it.
    const auto& o = known->second.hello;
    if (o.workerId == h.workerId && o.systems == h.systems &&
        o.supportedFeatures == h.supportedFeatures &&
        o.mandatoryFeatures == h.mandatoryFeatures && o.slots == h.slots &&
        o.speedFactor == h.speedFactor) {
      sendTo(peer, proto::Welcome{schedulerId,
                                  static_cast<uint32_t>(
                                      cfg.heartbeatInterval.count()),
                                  cfg.chunkSize});
      return;
    }
    dropWorker(peer, "sent Hello again with another description", true);
  }
  WorkerSpec spec;
  spec.name = user.empty() ? h.workerId : h.workerId + " (" + user + ")";
  spec.systems = h.systems;
  spec.supportedFeatures = h.supportedFeatures;
  spec.mandatoryFeatures = h.mandatoryFeatures;
  spec.slots = h.slots;
  spec.speedFactor = h.speedFactor;
  WorkerId wid;
  try {
    wid = core.registerWorker(spec);
  } catch (const Error& e) {
    return refuse(e.what());
  }
  Conn c;
  c.peer = peer;
  c.name = spec.name;
  c.wid = wid;
  c.hello = h;
  proto::TransferOptions to;
  to.chunkSize = cfg.chunkSize;
  to.clock = &clock;
  c.xfer = std::make_unique<proto::TransferEndpoint>(
      [this, peer](proto::Message&& m) {
        if (!server->send(peer, m))
          throw Error("worker " + peer + " is gone or its queue is full");
      },
      [this, peer](const proto::TransferHeader& hd, bool upload) {
        if (!upload) throw Error("the scheduler does not accept PathData");
        return acceptUpload(peer, hd);
      },
      [this](const proto::TransferOutcome& o) {
        if (!o.ok) logWarn("upload failed: " + o.error);
      },
      to);
  conns.emplace(peer, std::move(c));
  peerOf[wid] = peer;
  sendTo(peer, proto::Welcome{schedulerId,
                              static_cast<uint32_t>(
                                  cfg.heartbeatInterval.count()),
                              cfg.chunkSize});
  logInfo("worker " + spec.name + " joined with " +
          std::to_string(h.slots) + " slots");
  if (!pendingSince) pendingSince = clock.now();
}

void SchedulerService::Impl::dropWorker(const std::string& peer,
                                        const std::string& why,
                                        bool removeFromCore) {
  auto it = conns.find(peer);
  if (it == conns.end()) return;
  it->second.xfer->abortAll("worker left: " + why);
  WorkerId wid = it->second.wid;
  // A step with a held result no longer needs the worker.
  for (auto r = running.begin(); r != running.end();)
    r = r->second.peer == peer && !r->second.deferred ? running.erase(r)
                                                      : std::next(r);
  if (removeFromCore) core.removeWorker(wid);
  peerOf.erase(wid);
  conns.erase(it);
}

void SchedulerService::Impl::planInputs(const store::Derivation& drv,
                                        const Conn& c, proto::BuildStep& m) {
  store::StorePathSet roots = drv.inputSrcs;
  for (auto& [inDrv, outs] : drv.inputDrvs) {
    auto d = ingestor.loadDrv(store.printPath(inDrv));
    for (auto& o : outs) {
      auto it = d->outputs.find(o);
      if (it == d->outputs.end() || !it->second.path)
        throw Error("input " + store.printPath(inDrv) + " has no output " + o);
      roots.insert(*it->second.path);
    }
  }
  // A path the worker holds brings its whole closure (its store only
  // registers a path after its references), so the walk stops there: late
  // steps of deep package sets send a few paths, not thousands.
  std::unordered_set<const proto::PathInfo*> seen;
  std::vector<const store::StorePath*> todo;
  for (auto& r : roots) todo.push_back(&r);
  while (!todo.empty()) {
    const store::StorePath& p = *todo.back();
    todo.pop_back();
    if (c.present.count(p.baseName())) continue;
    const proto::PathInfo& info = cachedPathInfo(p);  // stable: node-based map
    if (!seen.insert(&info).second) continue;
    m.inputs.push_back(info);
    for (auto& r : info.references) todo.push_back(&r);
  }
  m.roots.assign(roots.begin(), roots.end());
}

const proto::PathInfo& SchedulerService::Impl::cachedPathInfo(
    const store::StorePath& path) {
  std::string key(path.baseName());
  auto it = pathInfoCache.find(key);
  if (it != pathInfoCache.end()) return it->second;
  return pathInfoCache.emplace(key, proto::toPathInfo(store.requirePathInfo(path)))
      .first->second;
}

bool SchedulerService::Impl::sendBuildStep(int64_t dbId, StepId sid,
                                           Conn& c) {
  auto row = db.step(dbId);
  if (!row) return false;
  proto::BuildStep m;
  m.stepId = static_cast<uint64_t>(dbId);
  Running run;
  try {
    auto path = store.parsePath(row->drvPath);
    m.drvPath = path;
    m.drv = readFile(store.physicalPath(path));
    auto drv = ingestor.loadDrv(row->drvPath);
    planInputs(*drv, c, m);
    for (auto& i : m.inputs) run.sentInputs.push_back(i.path);
    for (auto& [n, o] : drv->outputs)
      if (o.path) run.expected.emplace(n, *o.path);
    // Limits of the owner build (the lowest build id needing the step),
    // from its job's meta.maxSilent / meta.timeout.
    if (auto owner = db.build(core.step(sid).ownerBuild)) {
      m.maxSilentSec = static_cast<uint64_t>(owner->maxSilentSec);
      m.timeoutSec = static_cast<uint64_t>(owner->timeoutSec);
    }
  } catch (const std::exception& e) {
    logError("cannot dispatch " + row->drvPath + ": " + e.what());
    return false;
  }
  m.logLimitBytes = cfg.logLimitBytes;
  m.outputLimitBytes = cfg.outputLimitBytes;
  if (!server->send(c.peer, m)) return false;
  KILN_FAIL_POINT("scheduler.step-start.before-commit");
  db.startStep(dbId, c.name, clock.nowMs());
  KILN_FAIL_POINT("scheduler.step-start.after-commit");
  run.sid = sid;
  run.peer = c.peer;
  run.drvPath = row->drvPath;
  run.system = row->system;
  run.started = clock.now();
  run.attempt = row->attempts + 1;
  running[dbId] = std::move(run);
  return true;
}

void SchedulerService::Impl::onNeedPaths(Conn& c, const proto::NeedPaths& n) {
  auto it = running.find(static_cast<int64_t>(n.stepId));
  if (it == running.end() || it->second.peer != c.peer) {
    sendTo(c.peer, proto::Ack{proto::MessageType::kNeedPaths, n.stepId, false,
                              "step " + std::to_string(n.stepId) +
                                  " is not running on this worker"});
    return;
  }
  // A path we believed it holds is not there (its store changed): believe
  // nothing more of this connection, so the next steps carry all metadata.
  for (auto& p : n.paths)
    if (c.present.count(p.baseName())) {
      logWarn("worker " + c.name + " lacks " + p.baseName() +
              ", which it held; sending full input metadata from now on");
      c.present.clear();
      break;
    }
  for (auto& p : n.paths) {
    proto::TransferHeader h;
    try {
      h.info = cachedPathInfo(p);
    } catch (const store::InvalidPathError&) {
      sendTo(c.peer, proto::Ack{proto::MessageType::kNeedPaths, n.stepId,
                                false, "path " + store.printPath(p) +
                                           " is not in the central store"});
      continue;
    }
    h.stepId = n.stepId;
    uint64_t size = h.info.narSize;
    auto src = std::make_unique<LazyNarSource>(store.physicalPath(p), size,
                                               tmpPath());
    c.xfer->startSend(false, h, std::move(src),
                      [this, size](const proto::TransferOutcome& o) {
                        if (o.ok) metrics.addBytesSent(size);
                        else logWarn("input transfer failed: " + o.error);
                      });
  }
}

std::unique_ptr<proto::TransferTarget> SchedulerService::Impl::acceptUpload(
    const std::string& peer, const proto::TransferHeader& h) {
  int64_t id = static_cast<int64_t>(h.stepId);
  auto it = running.find(id);
  if (it == running.end() || it->second.peer != peer)
    throw Error("step " + std::to_string(id) +
                " is not running on this worker");
  auto ex = it->second.expected.find(h.outputName);
  if (ex == it->second.expected.end() || ex->second != h.info.path)
    throw Error("output '" + h.outputName + "' of " + it->second.drvPath +
                " is not " + store.printPath(h.info.path));
  if (cfg.outputLimitBytes && h.info.narSize > cfg.outputLimitBytes)
    throw Error("output " + store.printPath(h.info.path) +
                " exceeds the output limit");
  auto drvPath = store.parsePath(it->second.drvPath);
  return std::make_unique<UploadTarget>(
      tmpPath(), drvPath,
      [this, id](const proto::TransferHeader& hd, store::ValidPathInfo info,
                 AutoCloseFD nar) {
        metrics.addBytesReceived(hd.info.narSize);
        // Registered even if the step was dropped meanwhile: the output is
        // verified, and a retry elsewhere then finds it valid.
        auto r = running.find(id);
        if (r != running.end()) r->second.registering.insert(hd.outputName);
        registrar.submit({id, hd.outputName, std::move(info), std::move(nar)});
      });
}

void SchedulerService::Impl::takeRegistrations() {
  for (auto& d : registrar.takeDone()) {
    if (!d.error.empty())
      logError("registering output " + d.output + " of step " +
               std::to_string(d.step) + ": " + d.error);
    auto it = running.find(d.step);
    if (it == running.end()) continue;
    Running& run = it->second;
    run.registering.erase(d.output);
    if (d.error.empty()) run.uploaded.insert(d.output);
    if (run.registering.empty() && run.deferred) {
      auto result = std::move(*run.deferred);
      completeResult(d.step, result);
    }
  }
}

void SchedulerService::Impl::onLog(Conn& c, const proto::LogChunk& l) {
  auto it = running.find(static_cast<int64_t>(l.stepId));
  if (it == running.end() || it->second.peer != c.peer) return;
  Running& r = it->second;
  if (r.logTruncated) return;
  if (!r.log) {
    std::string path = stepLogPath(cfg.stateDir, r.drvPath, r.attempt);
    r.log = AutoCloseFD(open(path.c_str(),
                             O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!r.log) throwSysError("opening log " + path);
  }
  std::string_view data = l.data;
  if (cfg.logLimitBytes && r.logBytes + data.size() > cfg.logLimitBytes) {
    data = data.substr(0, cfg.logLimitBytes - r.logBytes);
    r.logTruncated = true;
  }
  writeAll(r.log.get(), data);
  r.logBytes += data.size();
  if (r.logTruncated)
    writeAll(r.log.get(), "\n[kiln: log truncated at the size limit]\n");
}

void SchedulerService::Impl::onResult(Conn& c, const proto::StepResult& m) {
  int64_t id = static_cast<int64_t>(m.stepId);
  auto it = running.find(id);
  if (it == running.end() || it->second.peer != c.peer) {
    sendTo(c.peer, proto::Ack{proto::MessageType::kStepResult, m.stepId,
                              false, "step not running on this worker"});
    return;
  }
  sendTo(c.peer, proto::Ack{proto::MessageType::kStepResult, m.stepId, true,
                            ""});
  // Its outputs arrived before the result; their registration may not
  // have finished yet.
  // The worker's slot is free either way: fill it while they finish.
  if (!it->second.registering.empty()) {
    it->second.deferred = m;
    core.releaseSlot(it->second.sid);
    return;
  }
  completeResult(id, m);
}

void SchedulerService::Impl::completeResult(int64_t id,
                                            const proto::StepResult& m) {
  auto it = running.find(id);
  Running run = std::move(it->second);
  running.erase(it);
  try {
    core.step(run.sid);
  } catch (const SchedulerError&) {
    index.erase(run.sid);
    return;  // cancelled while its outputs were being registered
  }
  auto dur = std::chrono::duration_cast<Duration>(clock.now() -
                                                  run.started);
  metrics.observeStepDuration(run.system,
                              std::chrono::duration<double>(dur).count());
  if (m.status == proto::StepStatus::kSuccess) {
    // Each output and its DerivationOutputs row were registered by the
    // registrar; an output missing here was not uploaded or not registered.
    for (auto& [name, path] : run.expected) {
      if (!run.uploaded.count(name) && !store.isValid(path)) {
        logWarn(run.drvPath + ": success reported but output " + name +
                " was not uploaded; retrying");
        core.finishStep(run.sid, StepResult::transient(dur));
        return;
      }
    }
    // The worker held every input to build, and holds the outputs now.
    if (auto conn = conns.find(run.peer); conn != conns.end()) {
      for (auto& p : run.sentInputs) conn->second.present.insert(p.baseName());
      for (auto& [name, path] : run.expected)
        conn->second.present.insert(path.baseName());
    }
    finishStepRow(db, id, 0, clock.nowMs(), "", std::nullopt);
    core.finishStep(run.sid, StepResult::success(dur));
    index.erase(run.sid);
  } else if (isTransient(m.status)) {
    core.finishStep(run.sid, StepResult::transient(dur));
    if (core.step(run.sid).state == StepView::State::kFailed)
      finishStepRow(db, id, static_cast<int>(m.status), clock.nowMs(),
                    m.errorMsg, std::nullopt);
  } else {
    StepStatus status = m.status;
    std::optional<CachedFailureRow> cached;
    if (m.status != proto::StepStatus::kDepFailed) {
      int64_t ttl = cfg.cachedFailureTtlSec;
      cached = CachedFailureRow{run.drvPath, static_cast<int>(m.status),
                                clock.nowMs(),
                                ttl ? clock.nowMs() + ttl * 1000 : 0};
    }
    finishStepRow(db, id, static_cast<int>(m.status), clock.nowMs(),
                  m.errorMsg, cached);
    core.finishStep(run.sid, StepResult::permanent(status, dur));
  }
  if (!pendingSince) pendingSince = clock.now();
}

}  // namespace kiln::scheduler
