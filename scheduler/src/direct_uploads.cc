// Direct uploads: grants, verification and publication of staged outputs,
// cleanup of staging (direct_uploads.h).
#include "direct_uploads.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kiln/common/logging.h"
#include "kiln/common/trace.h"
#include "kiln/store/compression.h"

namespace kiln::scheduler {

namespace proto = protocol;

std::string DirectUploads::attemptPrefix(int64_t step, int64_t attempt) {
  return "staging/" + std::to_string(step) + "/" + std::to_string(attempt) +
         "/";
}

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
      metrics_(registry) {
  if (!config.cacheUri.starts_with("s3://"))
    throw FormatError(
        "direct uploads need the farm's cache on an object "
        "store (--cache s3://…), not " +
        config.cacheUri);
  wake_ = AutoCloseFD(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_) throwSysError("creating the direct uploads' eventfd");
  unsigned n = config.directVerifyThreads;
  if (n == 0) n = std::clamp(std::thread::hardware_concurrency(), 1u, 2u);
  // Each thread has its own handle on the bucket (a curl handle is not
  // shared) and its own temporary names.
  for (unsigned i = 0; i < n; ++i)
    verifiers_.push_back(std::make_unique<Verifier>(Verifier{
        std::make_unique<store::S3CacheStorage>(config.cacheUri),
        TempNames(config.stateDir + "/tmp", "direct" + std::to_string(i)),
        {}}));
  for (auto& v : verifiers_)
    v->thread = std::thread([this, w = v.get()] { run(*w); });
}

DirectUploads::~DirectUploads() {
  {
    auto s = state_.lock();
    s->stop = true;
    s->queue.clear();
  }
  state_.notifyAll();
  for (auto& v : verifiers_) v->thread.join();
}

void DirectUploads::start(std::set<std::pair<int64_t, int64_t>> adoptable,
                          WallTime until) {
  // What an earlier scheduler granted is nobody's any more, but for the
  // attempts whose workers may come back.
  Cleanup c{"staging/", {}, {}, kAllSteps};
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
    submit(Cleanup{attemptPrefix(step, attempt), {}, {}, step});
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
    int64_t step = stepOf(job);
    s->queue.push(step, std::move(job));
    metrics_.setQueueLength(s->queue.waiting());
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
                 m.info.narSize, m.resumeUploadId});
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
  Cleanup c{attemptPrefix(step, attempt), {}, {}, step};
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
                     {},
                     d.step});
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

}  // namespace kiln::scheduler
