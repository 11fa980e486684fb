// The worker link (worker_link.h): Hello, heartbeats, Bye, lost workers,
// transfer endpoints (docs/protocol.md, docs/scheduler.md).
#include "worker_link.h"

#include <cstdio>

#include "kiln/common/byte_size.h"
#include "kiln/common/logging.h"

namespace kiln::scheduler {

namespace proto = protocol;

WorkerLink::WorkerLink(std::shared_ptr<proto::ServerTransport> transport,
                       Options options, SchedulerCore& core, const Clock& clock,
                       Handler& handler)
    : transport_(std::move(transport)),
      options_(std::move(options)),
      core_(core),
      clock_(clock),
      handler_(handler) {}

std::optional<proto::Received> WorkerLink::receive(
    std::chrono::milliseconds timeout, int wakeFd) {
  return transport_->receive(timeout, wakeFd);
}

bool WorkerLink::send(const std::string& peer, const proto::Message& m) {
  return transport_->send(peer, m);
}

void WorkerLink::sendOrWarn(const std::string& peer, const proto::Message& m) {
  if (!transport_->send(peer, m))
    logWarn("could not send to worker " + peer + " (gone or queue full)");
}

WorkerConn* WorkerLink::find(const std::string& peer) {
  auto it = conns_.find(peer);
  return it == conns_.end() ? nullptr : &it->second;
}

WorkerConn* WorkerLink::find(WorkerId w) {
  auto it = peerOf_.find(w);
  return it == peerOf_.end() ? nullptr : find(it->second);
}

WorkerHealth healthOf(const proto::Heartbeat& hb) {
  WorkerHealth h;
  h.loadAverage = hb.load;
  h.freeDisk = hb.freeDiskBytes;
  h.memoryPressure = hb.memoryPressure;
  h.cpuPressure = hb.cpuPressure;
  h.ioPressure = hb.ioPressure;
  h.freeMemory = hb.freeMemoryBytes;
  return h;
}

std::string healthText(const proto::Heartbeat& hb) {
  auto fixed = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return std::string(buf);
  };
  std::string out = "load " + fixed(hb.load);
  if (hb.memoryPressure || hb.cpuPressure || hb.ioPressure) {
    auto pct = [&](const std::optional<double>& v) {
      return v ? fixed(*v) : std::string("?");
    };
    out += ", memory/CPU/IO pressure " + pct(hb.memoryPressure) + "/" +
           pct(hb.cpuPressure) + "/" + pct(hb.ioPressure) + "%";
  }
  if (hb.freeMemoryBytes)
    out += ", " + formatByteSize(*hb.freeMemoryBytes) + " free memory";
  return out + ", " + formatByteSize(hb.freeDiskBytes) + " free disk";
}

PressureLimits limitsOf(const proto::PressureThresholds& t) {
  PressureLimits l;
  l.maxLoadAverage = t.maxLoadAverage;
  l.maxMemoryPressure = t.maxMemoryPressure;
  l.maxCpuPressure = t.maxCpuPressure;
  l.maxIoPressure = t.maxIoPressure;
  l.minFreeDisk = t.minFreeDiskBytes;
  return l;
}

void WorkerLink::handle(const proto::Received& r) {
  try {
    if (auto* h = std::get_if<proto::Hello>(&r.msg)) {
      onHello(r.peer, r.user, *h);
      if (WorkerConn* c = find(r.peer)) c->lastSeenMs = clock_.nowMs();
      return;
    }
    WorkerConn* c = find(r.peer);
    if (!c) {
      // A worker we do not know (e.g. after a scheduler restart or after it
      // was declared lost): it must introduce itself again.
      if (!std::holds_alternative<proto::Bye>(r.msg))
        sendOrWarn(r.peer, proto::Bye{"unknown worker: send Hello again"});
      return;
    }
    c->lastSeenMs = clock_.nowMs();
    if (c->xfer->handle(r.msg)) return;
    if (auto* hb = std::get_if<proto::Heartbeat>(&r.msg)) {
      core_.heartbeat(c->wid, hb->load / double(c->hello.slots), healthOf(*hb));
      c->heartbeat = *hb;
    } else if (auto* bye = std::get_if<proto::Bye>(&r.msg)) {
      drop(r.peer, "said bye: " + bye->reason, true);
    } else if (std::holds_alternative<proto::NeedPaths>(r.msg) ||
               std::holds_alternative<proto::LogChunk>(r.msg) ||
               std::holds_alternative<proto::StepResult>(r.msg) ||
               std::holds_alternative<proto::StageRequest>(r.msg) ||
               std::holds_alternative<proto::OutputStaged>(r.msg)) {
      handler_.onStepMessage(*c, r.msg);
    } else {
      logWarn("worker " + c->name + " sent an unexpected message");
    }
  } catch (const std::exception& e) {
    logError("handling a message from worker " + r.peer + ": " + e.what());
  }
}

bool WorkerLink::sameDescription(const proto::Hello& o, const proto::Hello& h) {
  return o.workerId == h.workerId && o.systems == h.systems &&
         o.supportedFeatures == h.supportedFeatures &&
         o.mandatoryFeatures == h.mandatoryFeatures && o.slots == h.slots &&
         o.speedFactor == h.speedFactor && o.thresholds == h.thresholds;
}

void WorkerLink::welcome(WorkerConn& c, bool joined) {
  proto::Welcome w{options_.schedulerId,
                   static_cast<uint32_t>(options_.heartbeatInterval.count()),
                   options_.chunkSize, handler_.adoptHeldSteps(c)};
  if (joined) {
    logInfo("worker " + c.name + " joined with " +
            std::to_string(c.hello.slots) + " slots");
    handler_.onWorkerJoined(c);
  }
  sendOrWarn(c.peer, w);
}

void WorkerLink::onHello(const std::string& peer, const std::string& user,
                         const proto::Hello& h) {
  auto refuse = [&](const std::string& why) {
    logWarn("refusing worker " + h.workerId + ": " + why);
    sendOrWarn(peer, proto::Refused{proto::kProtocolVersion, why});
  };
  if (h.protocolVersion != proto::kProtocolVersion)
    return refuse(
        proto::versionMismatchText(proto::kProtocolVersion, h.protocolVersion));
  if (h.storeDir != options_.storeDir)
    return refuse("store directory mismatch: the scheduler uses " +
                  options_.storeDir + ", this worker " + h.storeDir);
  if (WorkerConn* known = find(peer)) {
    // The same connection says Hello again (it took a Bye meant for a
    // message sent before its Hello, or missed our Welcome). The worker
    // keeps its steps across Hellos, so the scheduler keeps them too and
    // only repeats the Welcome; a changed description replaces it.
    if (sameDescription(known->hello, h)) {
      known->hello.heldSteps = h.heldSteps;
      return welcome(*known, false);
    }
    drop(peer, "sent Hello again with another description", true);
  }
  std::string key = user.empty() ? h.workerId : user;
  if (auto why = overKeyLimits(peer, key, h); !why.empty()) return refuse(why);
  WorkerSpec spec;
  spec.name = user.empty() ? h.workerId : h.workerId + " (" + user + ")";
  spec.systems = h.systems;
  spec.supportedFeatures = h.supportedFeatures;
  spec.mandatoryFeatures = h.mandatoryFeatures;
  spec.slots = h.slots;
  spec.speedFactor = h.speedFactor;
  spec.limits = limitsOf(h.thresholds);
  WorkerId wid;
  try {
    wid = core_.registerWorker(spec);
  } catch (const Error& e) {
    return refuse(e.what());
  }
  auto& c = conns_.emplace(peer, makeConnection(peer, spec.name, wid, h))
                .first->second;
  c.key = key;
  peerOf_[wid] = peer;
  welcome(c, true);
}

std::string WorkerLink::overKeyLimits(const std::string& peer,
                                      const std::string& key,
                                      const proto::Hello& h) const {
  size_t conns = 1;
  uint64_t slots = h.slots;
  for (auto& [p, c] : conns_)
    if (p != peer && c.key == key) {
      ++conns;
      slots += c.hello.slots;
    }
  const auto& o = options_;
  if (o.maxConnectionsPerKey && conns > o.maxConnectionsPerKey)
    return "worker key '" + key + "' already has " + std::to_string(conns - 1) +
           " connections, the limit per key: give each worker its own key, "
           "or raise kiln scheduler --max-connections-per-key";
  if (o.maxSlotsPerKey && slots > o.maxSlotsPerKey)
    return "worker key '" + key + "' would have " + std::to_string(slots) +
           " slots, more than the limit of " +
           std::to_string(o.maxSlotsPerKey) +
           " per key: give this worker fewer slots, or raise kiln scheduler "
           "--max-slots-per-key";
  return "";
}

WorkerConn WorkerLink::makeConnection(const std::string& peer,
                                      const std::string& name, WorkerId wid,
                                      const proto::Hello& h) {
  WorkerConn c;
  c.peer = peer;
  c.name = name;
  c.wid = wid;
  c.hello = h;
  proto::TransferOptions to;
  to.chunkSize = options_.chunkSize;
  to.maxActiveIncoming = options_.maxConcurrentUploads;
  to.maxQueuedIncoming = options_.maxQueuedUploads;
  to.clock = &clock_;
  c.xfer = std::make_unique<proto::TransferEndpoint>(
      [this, peer](proto::Message&& m) {
        if (!transport_->send(peer, m))
          throw Error("worker " + peer + " is gone or its queue is full");
      },
      [this, peer](const proto::TransferHeader& hd, bool upload) {
        if (!upload) throw Error("the scheduler does not accept PathData");
        WorkerConn* from = find(peer);
        if (!from) throw Error("worker " + peer + " is gone");
        return handler_.acceptUpload(*from, hd);
      },
      [](const proto::TransferOutcome& o) {
        if (!o.ok) logWarn("upload failed: " + o.error);
      },
      to);
  return c;
}

void WorkerLink::drop(const std::string& peer, const std::string& why,
                      bool removeFromCore) {
  auto it = conns_.find(peer);
  if (it == conns_.end()) return;
  it->second.xfer->abortAll("worker left: " + why);
  handler_.onWorkerLeft(it->second);
  WorkerId wid = it->second.wid;
  if (removeFromCore) core_.removeWorker(wid);
  peerOf_.erase(wid);
  conns_.erase(it);
}

void WorkerLink::dropLost(const std::vector<WorkerId>& lost) {
  for (auto w : lost) {
    WorkerConn* c = find(w);
    if (!c) continue;
    logWarn("worker " + c->name +
            " lost: no heartbeat for 3 intervals; its steps are retried");
    std::string peer = c->peer;  // `c` goes with the connection
    drop(peer, "no heartbeat", false);
  }
}

void WorkerLink::expireTransfers() {
  for (auto& [peer, c] : conns_) c.xfer->expireIdle();
}

}  // namespace kiln::scheduler
