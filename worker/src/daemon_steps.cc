// The worker daemon's steps: BuildStep → NeedPaths → inputs → build in a
// slot thread → uploads → StepResult (docs/protocol.md, docs/worker.md).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "daemon_impl.h"
#include "kiln/common/logging.h"
#include "kiln/common/trace.h"
#include "kiln/store/derivation.h"

namespace kiln::worker {
namespace {

namespace proto = protocol;
using proto::StepStatus;

// An input NAR: kept in an unlinked temporary file and added to the store
// on commit (after the endpoint verified hash and size; addFromNar checks
// them once more).
class InputTarget final : public proto::TransferTarget {
 public:
  InputTarget(store::LocalStore& store, const std::string& tmpDir)
      : store_(store), fd_(openUnlinkedTemp(tmpDir)) {}
  void write(std::string_view data) override { writeAll(fd_.get(), data); }
  void commit(const proto::TransferHeader& h) override {
    if (lseek(fd_.get(), 0, SEEK_SET) < 0) throwSysError("lseek");
    FdSource src(fd_.get());
    store_.addFromNar(proto::toValidPathInfo(h.info), src);
  }
  void discard(const std::string&) noexcept override { fd_.reset(); }

 private:
  store::LocalStore& store_;
  AutoCloseFD fd_;
};

// Fault injection (DebugFaults::corruptUploads): flips one byte of the
// first read, so the receiver's NAR hash check must refuse the transfer.
class CorruptingSource final : public Source {
 public:
  explicit CorruptingSource(std::unique_ptr<Source> inner)
      : inner_(std::move(inner)) {}
  size_t read(char* data, size_t len) override {
    size_t n = inner_->read(data, len);
    if (n > 0 && !done_) {
      data[n / 2] = static_cast<char>(data[n / 2] ^ 0x20);
      done_ = true;
    }
    return n;
  }

 private:
  std::unique_ptr<Source> inner_;
  bool done_ = false;
};

// `paths` ordered so that each comes after those of its references that
// are also in `paths`.
std::vector<store::StorePath> referencesFirst(
    const std::set<store::StorePath>& paths,
    const std::vector<proto::PathInfo>& infos) {
  std::map<store::StorePath, const proto::PathInfo*> byPath;
  for (auto& i : infos) byPath.emplace(i.path, &i);
  std::vector<store::StorePath> order;
  std::set<store::StorePath> seen;
  std::function<void(const store::StorePath&)> visit =
      [&](const store::StorePath& p) {
        if (!paths.count(p) || !seen.insert(p).second) return;
        if (auto it = byPath.find(p); it != byPath.end())
          for (auto& r : it->second->references)
            if (r != p) visit(r);
        order.push_back(p);
      };
  for (auto& p : paths) visit(p);
  return order;
}

// The .drv must be the text its path names (inputs as references).
void checkDrvPath(const store::StoreDir& dir, const proto::BuildStep& m,
                  const store::Derivation& drv) {
  store::StorePathSet refs = drv.inputSrcs;
  for (auto& [p, outs] : drv.inputDrvs) refs.insert(p);
  auto want = dir.makeTextPath(m.drvPath.name(),
                               hashString(HashAlgo::kSha256, m.drv), refs);
  if (want != m.drvPath)
    throw FormatError("BuildStep " + std::to_string(m.stepId) + ": " +
                      dir.printPath(m.drvPath) +
                      " does not match its contents (expected " +
                      dir.printPath(want) + ")");
}

}  // namespace

void Daemon::Impl::onBuildStep(const proto::BuildStep& m) {
  if (steps.count(m.stepId)) {
    logWarn("worker: step " + std::to_string(m.stepId) + " sent twice");
    return;
  }
  auto& s = *steps.emplace(m.stepId, std::make_unique<Step>()).first->second;
  s.msg = m;
  traceEvent("worker", "received", m.stepId, m.drvPath.baseName());
  try {
    auto name = m.drvPath.name();
    if (name.size() < 5 || name.substr(name.size() - 4) != ".drv")
      throw FormatError("BuildStep: " + m.drvPath.baseName() +
                        " is not a .drv path");
    auto drv = store::parseDerivation(store.storeDir(), m.drv,
                                      name.substr(0, name.size() - 4));
    checkDrvPath(store.storeDir(), m, drv);
    writeFile(drvDir + "/" + m.drvPath.baseName(), m.drv);
    if (std::find(cfg.systems.begin(), cfg.systems.end(), drv.platform) ==
            cfg.systems.end() &&
        drv.platform != "builtin")
      return finish(s, StepStatus::kUnsupported,
                    "this worker does not build for " + drv.platform);
    auto& r = s.request;
    r.drvPath = m.drvPath;
    r.drv = std::move(drv);
    r.limits.maxSilent = std::chrono::seconds(m.maxSilentSec);
    r.limits.timeout = std::chrono::seconds(m.timeoutSec);
    r.limits.logLimitBytes = m.logLimitBytes;
    r.limits.outputLimitBytes = m.outputLimitBytes;
    r.limits.resources = limitsFor(cfg.buildLimits, cfg.bigBuildLimits, r.drv);
    r.rankMs = m.rankMs;
    r.buildCores = std::max(1u, cfg.cores / std::max(1u, cfg.slots));
    planInputs(s);
  } catch (const std::exception& e) {
    return finish(s, StepStatus::kFailed, e.what());
  }
  if (s.missing.empty()) return startBuild(s);
  send(proto::NeedPaths{m.stepId, referencesFirst(s.missing, m.inputs)});
}

const std::vector<store::StorePath>* Daemon::Impl::localReferences(
    const store::StorePath& path) {
  if (auto it = validRefs.find(path.baseName()); it != validRefs.end())
    return &it->second;
  auto info = store.queryPathInfo(path);
  if (!info) return nullptr;
  return &validRefs
              .emplace(path.baseName(),
                       std::vector<store::StorePath>(info->references.begin(),
                                                     info->references.end()))
              .first->second;
}

void Daemon::Impl::planInputs(Step& s) {
  std::unordered_map<std::string_view, const proto::PathInfo*> sent;
  for (auto& i : s.msg.inputs) sent.emplace(i.path.baseName(), &i);
  store::StorePathSet closure;
  s.missing.clear();
  std::vector<const store::StorePath*> todo;
  for (auto& r : s.msg.roots) todo.push_back(&r);
  while (!todo.empty()) {
    const store::StorePath& p = *todo.back();
    todo.pop_back();
    if (!closure.insert(p).second) continue;
    const std::vector<store::StorePath>* refs = localReferences(p);
    if (refs) {
      for (auto& r : *refs) todo.push_back(&r);
      continue;
    }
    s.missing.insert(p);
    if (auto it = sent.find(p.baseName()); it != sent.end())
      for (auto& r : it->second->references) todo.push_back(&r);
  }
  s.request.inputClosure = std::move(closure);
}

std::unique_ptr<proto::TransferTarget> Daemon::Impl::acceptInput(
    const proto::TransferHeader& h, bool upload) {
  if (upload) throw Error("a worker does not accept uploads");
  auto it = steps.find(h.stepId);
  if (it == steps.end() || it->second->phase != Step::Phase::kFetching)
    throw Error("step " + std::to_string(h.stepId) +
                " is not waiting for inputs on this worker");
  transferSteps[h.transferId] = h.stepId;
  return std::make_unique<InputTarget>(store, tmpDir);
}

void Daemon::Impl::onInputReceived(const proto::TransferOutcome& o) {
  auto t = transferSteps.find(o.transferId);
  std::optional<uint64_t> owner;
  if (t != transferSteps.end()) {
    owner = t->second;
    transferSteps.erase(t);
  }
  if (!o.ok && owner) {
    auto it = steps.find(*owner);
    if (it != steps.end() && it->second->phase == Step::Phase::kFetching)
      finish(*it->second, StepStatus::kAborted,
             "fetching an input failed: " + o.error);
  }
  std::vector<Step*> ready;
  for (auto& [id, s] : steps) {
    if (s->phase != Step::Phase::kFetching) continue;
    for (auto p = s->missing.begin(); p != s->missing.end();)
      p = localReferences(*p) ? s->missing.erase(p) : std::next(p);
    if (!s->missing.empty()) continue;
    // A path the scheduler thought this worker held, fetched meanwhile,
    // may reference more that is missing: plan again.
    planInputs(*s);
    if (s->missing.empty())
      ready.push_back(s.get());
    else
      send(proto::NeedPaths{id, referencesFirst(s->missing, s->msg.inputs)});
  }
  for (auto* s : ready) startBuild(*s);
}

void Daemon::Impl::startBuild(Step& s) {
  s.phase = Step::Phase::kBuilding;
  uint64_t id = s.msg.stepId;
  traceEvent("worker", "slot-started", id);
  s.thread = std::thread([this, &s, id] {
    auto onLog = [this, id](std::string_view chunk) {
      postEvent(LogEvent{id, std::string(chunk)});
    };
    auto outcome = runSlot(s.request, id, runner, store, tmpDir, onLog,
                           s.cancel, clock, s.msg.check);
    traceEvent("worker", "slot-done", id);
    postEvent(DoneEvent{id, std::move(outcome)});
  });
}

void Daemon::Impl::postEvent(Event e) {
  {
    std::lock_guard lock(eventsMutex);
    events.push_back(std::move(e));
  }
  uint64_t one = 1;
  // A full counter (never in practice) still leaves the fd readable.
  if (::write(eventsWake.get(), &one, sizeof one) < 0 && errno != EAGAIN)
    logWarn(std::string("worker: waking the loop: ") + std::strerror(errno));
}

void Daemon::Impl::drainEvents() {
  uint64_t n = 0;
  if (::read(eventsWake.get(), &n, sizeof n) < 0 && errno != EAGAIN)
    logWarn(std::string("worker: reading the loop's eventfd: ") +
            std::strerror(errno));
  std::deque<Event> batch;
  {
    std::lock_guard lock(eventsMutex);
    batch.swap(events);
  }
  for (auto& e : batch) {
    if (auto* l = std::get_if<LogEvent>(&e)) {
      if (self.welcomed_) send(proto::LogChunk{l->stepId, std::move(l->data)});
    } else if (auto* st = std::get_if<StagedEvent>(&e)) {
      onStaged(*st);
    } else {
      onDone(std::get<DoneEvent>(e));
    }
  }
}

void Daemon::Impl::onDone(DoneEvent& d) {
  auto it = steps.find(d.stepId);
  if (it == steps.end()) return;
  Step& s = *it->second;
  if (s.thread.joinable()) s.thread.join();
  traceEvent("worker", "done-seen", d.stepId);
  if (s.dropped) return eraseStep(it);
  s.result = d.outcome.result;
  if (s.result.status != StepStatus::kSuccess) return report(s);
  s.built = s.result;
  s.builtOutputs.clear();
  for (auto& o : d.outcome.outputs) s.builtOutputs.push_back({o.name, o.info});
  if (!xfer || !self.welcomed_) {
    // Kept: a scheduler that adopts the step gets the outputs uploaded.
    logInfo("worker: step " + std::to_string(d.stepId) +
            " built while disconnected; its outputs wait for the scheduler");
    s.result.status = StepStatus::kAborted;
    s.result.errorMsg = "connection to the scheduler lost before the upload";
    return report(s);
  }
  startUploads(s, std::move(d.outcome.outputs));
}

void Daemon::Impl::startUploads(Step& s, std::vector<PreparedOutput> outputs) {
  s.phase = Step::Phase::kUploading;
  s.result = *s.built;
  s.result.outputs.clear();
  s.uploadError.clear();
  s.awaitingGrant.clear();
  s.uploadsLeft = outputs.size() + s.staged.size();
  if (s.uploadsLeft == 0) return report(s);
  // Staged before a reconnection: announced again, not uploaded again
  // (the scheduler that adopted the step verifies them as staged now).
  for (auto& [name, m] : s.staged) {
    send(proto::Message(m));
    outputDone(s, {name, m.info}, "");
  }
  if (s.phase != Step::Phase::kUploading) return;  // all staged: reported
  if (!cfg.directUploads.empty()) journalStep(s);
  for (auto& o : outputs) {
    // A check's outputs go to the scheduler, never to the farm's cache.
    if (cfg.directUploads.empty() || s.msg.check) {
      uploadOverConnection(s, std::move(o));
      continue;
    }
    send(stageRequest(s, o.name, o.info));
    std::string name = o.name;
    s.awaitingGrant.emplace(name, std::move(o));
  }
}

void Daemon::Impl::uploadOverConnection(Step& s, PreparedOutput o) {
  uint64_t id = s.msg.stepId;
  proto::TransferHeader h;
  h.stepId = id;
  h.outputName = o.name;
  h.info = o.info;
  proto::BuiltOutput built{o.name, o.info};
  std::unique_ptr<Source> src =
      std::make_unique<OwnedFdSource>(std::move(o.nar));
  if (cfg.debug.corruptUploads > 0) {
    cfg.debug.corruptUploads--;
    logWarn("worker: corrupting the upload of " + o.name +
            " (--debug-corrupt-uploads)");
    src = std::make_unique<CorruptingSource>(std::move(src));
  }
  xfer->startSend(true, h, std::move(src),
                  [this, id, built](const proto::TransferOutcome& r) {
                    auto st = steps.find(id);
                    if (st == steps.end()) return;
                    traceEvent("worker", "uploaded", id, built.name);
                    outputDone(
                        *st->second, built,
                        r.ok ? "" : "uploading " + built.name + ": " + r.error);
                  });
}

void Daemon::Impl::outputDone(Step& s, const proto::BuiltOutput& out,
                              const std::string& error) {
  if (s.phase != Step::Phase::kUploading || s.uploadsLeft == 0) return;
  if (error.empty())
    s.result.outputs.push_back(out);
  else
    s.uploadError = error;
  if (--s.uploadsLeft > 0) return;
  if (!s.uploadError.empty()) {
    s.result.status = StepStatus::kAborted;
    s.result.errorMsg = s.uploadError;
    s.result.outputs.clear();
  }
  report(s);
}

void Daemon::Impl::reconcile(const std::vector<uint64_t>& adopted) {
  std::set<uint64_t> keep(adopted.begin(), adopted.end());
  for (auto it = steps.begin(); it != steps.end();) {
    Step& s = *it->second;
    if (keep.count(it->first)) {
      resume(s);
      ++it;
    } else if (s.phase == Step::Phase::kBuilding) {
      if (!s.dropped)
        logWarn("worker: cancelling step " + std::to_string(it->first) +
                " (the scheduler did not take it back)");
      s.dropped = true;  // erased when its slot thread ends
      s.cancel.cancel(StepStatus::kCancelled);
      ++it;
    } else {
      if (!s.dropped)
        logWarn("worker: dropping step " + std::to_string(it->first) +
                " (the scheduler did not take it back)");
      if (s.thread.joinable()) s.thread.join();
      eraseStep(it++);
    }
  }
}

void Daemon::Impl::resume(Step& s) {
  logInfo("worker: the scheduler took back step " +
          std::to_string(s.msg.stepId));
  switch (s.phase) {
    case Step::Phase::kFetching:
      planInputs(s);
      if (s.missing.empty()) return startBuild(s);
      return send(proto::NeedPaths{s.msg.stepId,
                                   referencesFirst(s.missing, s.msg.inputs)});
    case Step::Phase::kBuilding:
      return;
    case Step::Phase::kUploading:
      // A grant that went with the old connection is asked for again
      // (same attempt: same key), what was staged is announced again;
      // one staging now reports to this scheduler.
      for (auto& [name, o] : s.awaitingGrant)
        send(stageRequest(s, name, o.info));
      for (auto& [name, m] : s.staged) send(proto::Message(m));
      return;
    case Step::Phase::kReporting:
      if (!s.built) return report(s);
      try {
        std::vector<proto::BuiltOutput> left;
        for (auto& o : s.builtOutputs)
          if (!s.staged.count(o.name)) left.push_back(o);
        return startUploads(s, prepareAgain(left, store, tmpDir));
      } catch (const std::exception& e) {
        return finish(s, StepStatus::kAborted,
                      std::string("preparing the outputs again: ") + e.what());
      }
  }
}

void Daemon::Impl::finish(Step& s, StepStatus status,
                          const std::string& error) {
  s.result = {};
  s.result.stepId = s.msg.stepId;
  s.result.status = status;
  s.result.errorMsg = error.substr(0, 60000);
  s.result.startTimeMs = s.result.stopTimeMs = clock.nowMs();
  if (status != StepStatus::kSuccess && s.result.errorMsg.empty())
    s.result.errorMsg = "failed";
  report(s);
}

void Daemon::Impl::report(Step& s) {
  s.phase = Step::Phase::kReporting;
  traceEvent("worker", "result-sent", s.msg.stepId);
  if (s.result.errorMsg.size() > 60000) s.result.errorMsg.resize(60000);
  if (self.welcomed_) send(proto::Message(s.result));
}

void Daemon::Impl::onCancel(const proto::CancelStep& m) {
  auto it = steps.find(m.stepId);
  if (it == steps.end()) return;
  Step& s = *it->second;
  if (s.phase == Step::Phase::kFetching)
    finish(s, StepStatus::kCancelled, "cancelled: " + m.reason);
  else if (s.phase == Step::Phase::kBuilding)
    s.cancel.cancel(StepStatus::kCancelled);
}

void Daemon::Impl::onAck(const proto::Ack& a) {
  auto it = steps.find(a.id);
  if (it == steps.end()) return;
  Step& s = *it->second;
  if (a.subject == proto::MessageType::kStepResult &&
      s.phase == Step::Phase::kReporting) {
    if (!a.ok)
      logWarn("worker: scheduler rejected the result of step " +
              std::to_string(a.id) + ": " + a.error);
    if (s.thread.joinable()) s.thread.join();
    eraseStep(it);
  } else if (a.subject == proto::MessageType::kStageRequest ||
             a.subject == proto::MessageType::kOutputStaged) {
    onStageAck(s, a);
  } else if (a.subject == proto::MessageType::kNeedPaths && !a.ok &&
             s.phase == Step::Phase::kFetching) {
    finish(s, StepStatus::kAborted,
           "the scheduler cannot send an input: " + a.error);
  }
}

}  // namespace kiln::worker
