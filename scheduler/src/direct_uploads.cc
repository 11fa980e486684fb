// Direct uploads: grants, verification and publication of staged outputs,
// cleanup of staging (direct_uploads.h).
#include "direct_uploads.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kiln/common/fail_point.h"
#include "kiln/common/logging.h"
#include "kiln/common/trace.h"
#include "kiln/store/compression.h"
#include "kiln/store/content_check.h"

namespace kiln::scheduler {

namespace proto = protocol;

namespace {

// The largest a compressed NAR of `narSize` bytes may be: zstd and xz
// add a little to incompressible data, never more than this.
uint64_t objectBound(uint64_t narSize) {
  return narSize + narSize / 64 + (1 << 20);
}

std::string attemptPrefix(int64_t step, int64_t attempt) {
  return "staging/" + std::to_string(step) + "/" + std::to_string(attempt) +
         "/";
}

}  // namespace

DirectUploads::DirectUploads(const ServiceConfig& config, RunningSteps& steps,
                             Uploads& uploads, WorkerLink& link,
                             const Clock& clock, prometheus::Registry& registry)
    : config_(config),
      steps_(steps),
      uploads_(uploads),
      link_(link),
      clock_(clock),
      storeDir_(config.storeDir),
      tmpDir_(config.stateDir + "/tmp"),
      s3_(std::make_unique<store::S3CacheStorage>(config.cacheUri)),
      temps_(config.stateDir + "/tmp", "direct"),
      metrics_(registry) {
  if (!config.cacheUri.starts_with("s3://"))
    throw FormatError(
        "direct uploads need the farm's cache on an object "
        "store (--cache s3://…), not " +
        config.cacheUri);
  wake_ = AutoCloseFD(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_) throwSysError("creating the direct uploads' eventfd");
  thread_ = std::thread([this] { run(); });
}

DirectUploads::~DirectUploads() {
  {
    auto s = state_.lock();
    s->stop = true;
    s->queue.clear();
  }
  state_.notifyAll();
  thread_.join();
}

void DirectUploads::start(std::set<std::pair<int64_t, int64_t>> adoptable,
                          WallTime until) {
  // What an earlier scheduler granted is nobody's any more, but for the
  // attempts whose workers may come back.
  Cleanup c{"staging/", {}, {}};
  for (auto& [step, attempt] : adoptable)
    c.keep.insert(attemptPrefix(step, attempt));
  kept_ = std::move(adoptable);
  keptUntil_ = until;
  submit(std::move(c));
}

void DirectUploads::tick(WallTime now) {
  if (kept_.empty() || now < keptUntil_) return;
  for (auto& [step, attempt] : std::exchange(kept_, {})) {
    const RunningStep* run = steps_.find(step);
    if (run && run->attempt == attempt) continue;  // goes when it ends
    submit(Cleanup{attemptPrefix(step, attempt), {}, {}});
  }
}

std::string DirectUploads::stagingKey(int64_t step, int64_t attempt,
                                      const std::string& output,
                                      const std::string& compression) {
  return attemptPrefix(step, attempt) + output + ".nar" +
         store::compressionExtension(compression);
}

void DirectUploads::submit(Job job) {
  {
    auto s = state_.lock();
    s->queue.push_back(std::move(job));
    metrics_.setQueueLength(s->queue.size());
  }
  state_.notifyAll();
}

void DirectUploads::refuse(const std::string& peer, proto::MessageType subject,
                           uint64_t step, const std::string& why) {
  link_.sendOrWarn(peer, proto::Ack{subject, step, false, why});
}

void DirectUploads::onStageRequest(const WorkerConn& from,
                                   const proto::StageRequest& m) {
  try {
    const RunningStep& run =
        uploads_.expectedOutput(from, m.stepId, m.outputName, m.info);
    submit(Grant{from.peer, run.id, run.attempt, m.outputName, m.compression,
                 m.info.narSize});
  } catch (const Error& e) {
    refuse(from.peer, proto::MessageType::kStageRequest, m.stepId, e.what());
  }
}

void DirectUploads::onOutputStaged(const WorkerConn& from,
                                   const proto::OutputStaged& m) {
  auto id = static_cast<int64_t>(m.stepId);
  const RunningStep* run = steps_.find(id, from.peer);
  auto g = granted_.find({id, m.outputName});
  auto refuse = [&](const std::string& why) {
    this->refuse(from.peer, proto::MessageType::kOutputStaged, m.stepId, why);
  };
  Granted gr;
  bool derived = false;  // re-announced, no grant of this scheduler
  if (run && g != granted_.end() && g->second.attempt == run->attempt) {
    gr = g->second;
    granted_.erase(g);
  } else if (auto d = run ? derivedStaging(*run, m) : std::nullopt) {
    // Already verified (ok again), or under way (its verdict comes),
    // else checked as a StageRequest and verified as any staged object.
    if (run->uploaded.count(m.outputName))
      return link_.sendOrWarn(
          from.peer,
          proto::Ack{proto::MessageType::kOutputStaged, m.stepId, true, ""});
    if (run->registering.count(m.outputName)) return;
    try {
      uploads_.expectedOutput(from, m.stepId, m.outputName, m.info);
    } catch (const Error& e) {
      return refuse(e.what());
    }
    logInfo("direct uploads: output " + m.outputName + " of adopted step " +
            std::to_string(id) + " re-announced at " + d->second +
            ": verifying it");
    gr = Granted{d->first, d->second, m.compression, ""};
    derived = true;
  } else {
    return refuse("no staging of output '" + m.outputName + "' of step " +
                  std::to_string(id) + " was granted to this worker");
  }
  auto ex = run->expected.find(m.outputName);
  if (m.key != gr.key || m.compression != gr.compression ||
      ex == run->expected.end() || ex->second != m.info.path ||
      (!derived && m.etags.empty() != gr.uploadId.empty()) ||
      m.etags.size() > proto::kMaxStageParts)
    return refuse("output '" + m.outputName + "' of step " +
                  std::to_string(id) + " was not staged as granted (" + gr.key +
                  ")");
  steps_.outputRegistering(id, m.outputName);
  metrics_.countStaged(m.fileSize);
  traceEvent("scheduler", "output-staged", m.stepId, m.outputName);
  submit(verifyJob(from, *run, m, gr));
}

DirectUploads::Verify DirectUploads::verifyJob(const WorkerConn& from,
                                               const RunningStep& run,
                                               const proto::OutputStaged& m,
                                               const Granted& gr) {
  Verify v{from.peer,   run.id,  run.attempt, m.outputName, {},
           gr.uploadId, m.etags, m.fileHash,  m.fileSize};
  v.staged.key = gr.key;
  v.staged.compression = gr.compression;
  v.staged.claimed = store::ValidPathInfo(m.info.path);
  v.staged.claimed.narHash = m.info.narHash;
  v.staged.claimed.narSize = m.info.narSize;
  v.staged.claimed.deriver = storeDir_.parsePath(run.drvPath);
  if (auto f = run.fixedCa.find(m.outputName); f != run.fixedCa.end())
    v.staged.claimed.ca = f->second;
  v.staged.candidates = steps_.referenceCandidates(run.id);
  return v;
}

std::optional<std::pair<int64_t, std::string>> DirectUploads::derivedStaging(
    const RunningStep& run, const proto::OutputStaged& m) const {
  if (!run.adopted || (m.compression != "zstd" && m.compression != "xz"))
    return std::nullopt;
  std::string key =
      stagingKey(run.id, run.attempt, m.outputName, m.compression);
  if (m.key != key) return std::nullopt;
  return std::make_pair(run.attempt, key);
}

void DirectUploads::attemptEnded(int64_t step, int64_t attempt) {
  Cleanup c{attemptPrefix(step, attempt), {}, {}};
  for (auto it = granted_.lower_bound({step, ""});
       it != granted_.end() && it->first.first == step;) {
    if (it->second.attempt != attempt) {
      ++it;
      continue;
    }
    if (!it->second.uploadId.empty())
      c.uploads.emplace_back(it->second.key, it->second.uploadId);
    it = granted_.erase(it);
  }
  submit(std::move(c));
}

void DirectUploads::takeDone() {
  uint64_t n = 0;
  if (::read(wake_.get(), &n, sizeof n) < 0 && errno != EAGAIN)
    logWarn(std::string("direct uploads: reading the eventfd: ") +
            std::strerror(errno));
  std::vector<Done> done = std::exchange(state_.lock()->done, {});
  for (auto& d : done) {
    switch (d.kind) {
      case Done::Kind::kGrant:
        granted(d);
        break;
      case Done::Kind::kVerify:
        verified(d);
        break;
      case Done::Kind::kCleanup:
        if (!d.error.empty()) logWarn("direct uploads: " + d.error);
        break;
    }
  }
}

void DirectUploads::granted(Done& d) {
  auto id = static_cast<uint64_t>(d.step);
  const RunningStep* run = steps_.find(d.step, d.peer);
  if (!d.error.empty()) {
    // The worker uploads over its connection instead.
    logWarn("direct uploads: no staging for output " + d.output + " of step " +
            std::to_string(d.step) + ": " + d.error);
    return refuse(d.peer, proto::MessageType::kStageRequest, id, d.error);
  }
  // The attempt ended meanwhile: its cleanup, queued after this grant,
  // aborted nothing of it; a multipart upload is aborted now.
  if (!run || run->attempt != d.attempt) {
    if (!d.grant.uploadId.empty())
      submit(Cleanup{attemptPrefix(d.step, d.attempt),
                     {{d.grant.key, d.grant.uploadId}},
                     {}});
    return;
  }
  granted_[{d.step, d.output}] =
      Granted{d.attempt, d.grant.key, d.grant.compression, d.grant.uploadId};
  link_.sendOrWarn(d.peer, d.grant);
}

void DirectUploads::verified(Done& d) {
  auto id = static_cast<uint64_t>(d.step);
  if (!d.error.empty()) {
    logError("direct upload of output " + d.output + " of step " +
             std::to_string(d.step) + " refused: " + d.error);
    if (d.rejected)
      steps_.outputRejected(d.step, d.output, d.error);
    else
      steps_.outputRegistered(d.step, d.output, false);
    return refuse(d.peer, proto::MessageType::kOutputStaged, id, d.error);
  }
  link_.sendOrWarn(d.peer,
                   proto::Ack{proto::MessageType::kOutputStaged, id, true, ""});
  uploads_.registerVerified(d.step, d.output, std::move(d.info),
                            std::move(d.nar));
}

// ------------------------------------------------------ the verifier thread

void DirectUploads::run() noexcept {
  for (;;) {
    std::optional<Job> job;
    {
      auto s = state_.lock();
      s.wait([&] { return s->stop || !s->queue.empty(); });
      if (s->stop) return;
      job.emplace(std::move(s->queue.front()));
      s->queue.pop_front();
      metrics_.setQueueLength(s->queue.size());
    }
    Done d = std::visit([&](auto& j) { return handle(j); }, *job);
    state_.lock()->done.push_back(std::move(d));
    uint64_t one = 1;
    if (::write(wake_.get(), &one, sizeof one) < 0)
      logWarn(std::string("waking the scheduler loop: ") +
              std::strerror(errno));
  }
}

DirectUploads::Done DirectUploads::handle(Grant& g) {
  Done d;
  d.kind = Done::Kind::kGrant;
  d.peer = g.peer;
  d.step = g.step;
  d.attempt = g.attempt;
  d.output = g.output;
  try {
    proto::StageGrant& m = d.grant;
    m.stepId = uint64_t(g.step);
    m.outputName = g.output;
    m.compression = g.compression;
    m.key = stagingKey(g.step, g.attempt, g.output, g.compression);
    int64_t now = clock_.nowMs() / 1000;
    uint64_t bound = objectBound(g.narSize);
    if (bound <= config_.directPartBytes) {
      m.urls.push_back(s3_->presignPut(m.key, config_.directGrantExpiry, now));
      return d;
    }
    // Parts of at least directPartBytes, at most 10000 of them.
    m.partSize = std::max<uint64_t>(
        {config_.directPartBytes, uint64_t(5) << 20,
         (bound + proto::kMaxStageParts - 1) / proto::kMaxStageParts});
    m.uploadId = s3_->startMultipart(m.key);
    uint64_t parts = (bound + m.partSize - 1) / m.partSize;
    for (uint64_t p = 1; p <= parts; ++p)
      m.urls.push_back(s3_->presignPart(m.key, m.uploadId, int(p),
                                        config_.directGrantExpiry, now));
  } catch (const std::exception& e) {
    d.error = e.what();
  }
  return d;
}

DirectUploads::Done DirectUploads::handle(Verify& v) {
  Done d;
  KILN_FAIL_POINT("scheduler.direct.before-verify");
  auto start = clock_.now();
  try {
    d = verify(v);
  } catch (const store::StagedNarMismatchError& e) {
    d.error = e.what();  // a corrupt upload: the step is retried
  } catch (const store::ContentMismatchError& e) {
    d.error = e.what();  // not the declared content: the step fails
    d.rejected = true;
  } catch (const std::exception& e) {
    d.error = e.what();
  }
  metrics_.observeVerification(
      std::chrono::duration<double>(clock_.now() - start).count(),
      d.error.empty());
  d.kind = Done::Kind::kVerify;
  d.peer = v.peer;
  d.step = v.step;
  d.attempt = v.attempt;
  d.output = v.output;
  if (!d.error.empty()) {
    // Nothing of a refused object stays (a multipart upload that did not
    // complete goes too).
    try {
      if (!v.uploadId.empty()) s3_->abortMultipart(v.staged.key, v.uploadId);
      s3_->remove(v.staged.key);
    } catch (const std::exception& e) {
      logWarn("direct uploads: removing " + v.staged.key + ": " + e.what());
    }
    d.nar.reset();
  }
  return d;
}

void DirectUploads::completeUpload(const Verify& v) {
  if (v.etags.empty()) return;
  if (!v.uploadId.empty())
    return s3_->completeMultipart(v.staged.key, v.uploadId, v.etags);
  // Re-announced: the upload the earlier scheduler started, unless it
  // completed it already (then the object is there, and is verified).
  for (auto& [key, id] : s3_->listMultipartUploads(v.staged.key))
    if (key == v.staged.key)
      return s3_->completeMultipart(v.staged.key, id, v.etags);
}

DirectUploads::Done DirectUploads::verify(Verify& v) {
  completeUpload(v);
  Done d;
  d.nar = openUnlinkedTemp(temps_.next());
  FdSink copy(d.nar.get());
  store::DecompressionLimits limits;
  auto verdict = store::verifyStaged(*s3_, storeDir_, v.staged, limits, &copy);
  copy.flush();
  if (!(verdict.fileHash == v.fileHash) || verdict.fileSize != v.fileSize)
    throw Error("staged object " + v.staged.key + " is not what the worker " +
                "uploaded: " + std::to_string(verdict.fileSize) +
                " bytes hashing to " + verdict.fileHash.toNix32() +
                ", the worker said " + std::to_string(v.fileSize) + " and " +
                v.fileHash.toNix32());
  // A fixed output refers to nothing (as an upload over the connection).
  if (!v.staged.claimed.ca.empty() && !verdict.references.empty())
    throw store::ContentMismatchError(
        "illegal path references in fixed-output " +
        storeDir_.printPath(v.staged.claimed.path));
  const store::SecretKey* key =
      config_.cacheSigningKey ? &*config_.cacheSigningKey : nullptr;
  store::publishStaged(*s3_, storeDir_, v.staged, verdict, key);
  d.info = v.staged.claimed;
  d.info.references = verdict.references;
  d.info.ultimate = true;
  if (::lseek(d.nar.get(), 0, SEEK_SET) < 0) throwSysError("lseek");
  return d;
}

DirectUploads::Done DirectUploads::handle(Cleanup& c) {
  Done d;
  d.kind = Done::Kind::kCleanup;
  try {
    for (auto& [key, id] : c.uploads) s3_->abortMultipart(key, id);
    sweepKeeping(c);
  } catch (const std::exception& e) {
    d.error =
        "removing " + c.prefix + " of " + config_.cacheUri + ": " + e.what();
  }
  return d;
}

void DirectUploads::sweepKeeping(const Cleanup& c) {
  auto kept = [&](const std::string& key) {
    auto it = c.keep.upper_bound(key);
    return it != c.keep.begin() && key.starts_with(*std::prev(it));
  };
  if (c.prefix == "staging/")
    for (auto& [key, id] : s3_->listMultipartUploads(c.prefix))
      if (!kept(key)) s3_->abortMultipart(key, id);
  size_t n = 0;
  if (c.keep.empty()) {
    n = s3_->removePrefix(c.prefix);
  } else {
    for (auto& key : s3_->list(c.prefix))
      if (!kept(key)) {
        s3_->remove(key);
        ++n;
      }
  }
  if (n > 0 && c.prefix == "staging/")
    logInfo("direct uploads: removed " + std::to_string(n) +
            " staging objects left by an earlier run" +
            (c.keep.empty()
                 ? std::string()
                 : " (kept those of " + std::to_string(c.keep.size()) +
                       " attempts their workers may re-announce)"));
}

}  // namespace kiln::scheduler
