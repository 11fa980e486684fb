// The verifier threads of direct uploads (direct_uploads.h): grants,
// verification and publication, cleanup of staging, each job on one of
// the threads. Jobs of one step run one at a time and in order; a cleanup
// of all of `staging/` (at start) runs alone, after what came before it
// and before what comes after.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "direct_uploads.h"
#include "kiln/common/fail_point.h"
#include "kiln/common/logging.h"
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

}  // namespace

int64_t DirectUploads::stepOf(const Job& job) {
  return std::visit([](const auto& j) { return j.step; }, job);
}

void DirectUploads::run(Verifier& self) noexcept {
  for (;;) {
    std::optional<std::pair<int64_t, Job>> job;
    {
      auto s = state_.lock();
      s.wait([&] {
        if (s->stop) return true;
        job = s->queue.take();
        return job.has_value();
      });
      if (s->stop) return;
      metrics_.setQueueLength(s->queue.waiting());
    }
    Done d = std::visit([&](auto& j) { return handle(j, self); }, job->second);
    {
      auto s = state_.lock();
      s->done.push_back(std::move(d));
      s->queue.done(job->first);
    }
    state_.notifyAll();  // a job of that step may go now
    uint64_t one = 1;
    if (::write(wake_.get(), &one, sizeof one) < 0)
      logWarn(std::string("waking the scheduler loop: ") +
              std::strerror(errno));
  }
}
DirectUploads::Done DirectUploads::handle(Grant& g, Verifier& self) {
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
    presign(g, m, *self.s3);
  } catch (const std::exception& e) {
    d.error = e.what();
  }
  return d;
}

void DirectUploads::presign(const Grant& g, proto::StageGrant& m,
                            store::S3CacheStorage& s3) {
  int64_t now = clock_.nowMs() / 1000;
  uint64_t bound = objectBound(g.narSize);
  if (bound <= config_.directPartBytes) {
    m.urls.push_back(s3.presignPut(m.key, config_.directGrantExpiry, now));
    return;
  }
  // Parts of at least directPartBytes, at most 10000 of them.
  m.partSize = std::max<uint64_t>(
      {config_.directPartBytes, uint64_t(5) << 20,
       (bound + proto::kMaxStageParts - 1) / proto::kMaxStageParts});
  uint64_t parts = (bound + m.partSize - 1) / m.partSize;
  // A resumed upload is only ever one of this attempt's key (the key is
  // derived from the attempt, never taken from the worker).
  if (!g.resumeUploadId.empty() && holdsUpload(s3, m.key, g.resumeUploadId)) {
    m.uploadId = g.resumeUploadId;
    for (auto& p : s3.listParts(m.key, m.uploadId))
      if (uint64_t(p.number) <= parts)
        m.uploadedParts.push_back({uint32_t(p.number), p.etag, p.size});
    logInfo("direct uploads: resuming " + m.key + " (" +
            std::to_string(m.uploadedParts.size()) + " parts uploaded)");
  } else {
    if (!g.resumeUploadId.empty())
      logInfo("direct uploads: " + m.key + " has no upload " +
              g.resumeUploadId + " any more: starting another");
    m.uploadId = s3.startMultipart(m.key);
  }
  for (uint64_t p = 1; p <= parts; ++p)
    m.urls.push_back(s3.presignPart(m.key, m.uploadId, int(p),
                                    config_.directGrantExpiry, now));
}

bool DirectUploads::holdsUpload(store::S3CacheStorage& s3,
                                const std::string& key, const std::string& id) {
  for (auto& [k, u] : s3.listMultipartUploads(key))
    if (k == key && u == id) return true;
  return false;
}

DirectUploads::Done DirectUploads::handle(Verify& v, Verifier& self) {
  Done d;
  KILN_FAIL_POINT("scheduler.direct.before-verify");
  auto start = clock_.now();
  try {
    d = verify(v, self);
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
      if (!v.uploadId.empty())
        self.s3->abortMultipart(v.staged.key, v.uploadId);
      self.s3->remove(v.staged.key);
    } catch (const std::exception& e) {
      logWarn("direct uploads: removing " + v.staged.key + ": " + e.what());
    }
    d.nar.reset();
  }
  return d;
}

void DirectUploads::completeUpload(const Verify& v, store::S3CacheStorage& s3) {
  if (v.etags.empty()) return;
  if (!v.uploadId.empty())
    return s3.completeMultipart(v.staged.key, v.uploadId, v.etags);
  // Re-announced: the upload the earlier scheduler started, unless it
  // completed it already (then the object is there, and is verified).
  for (auto& [key, id] : s3.listMultipartUploads(v.staged.key))
    if (key == v.staged.key)
      return s3.completeMultipart(v.staged.key, id, v.etags);
}

DirectUploads::Done DirectUploads::verify(Verify& v, Verifier& self) {
  store::S3CacheStorage& s3 = *self.s3;
  completeUpload(v, s3);
  Done d;
  d.nar = openUnlinkedTemp(self.temps.next());
  FdSink copy(d.nar.get());
  store::DecompressionLimits limits;
  auto verdict = store::verifyStaged(s3, storeDir_, v.staged, limits, &copy);
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
  store::publishStaged(s3, storeDir_, v.staged, verdict, key);
  d.info = v.staged.claimed;
  d.info.references = verdict.references;
  d.info.ultimate = true;
  if (::lseek(d.nar.get(), 0, SEEK_SET) < 0) throwSysError("lseek");
  return d;
}

DirectUploads::Done DirectUploads::handle(Cleanup& c, Verifier& self) {
  Done d;
  d.kind = Done::Kind::kCleanup;
  try {
    for (auto& [key, id] : c.uploads) self.s3->abortMultipart(key, id);
    sweepKeeping(c, *self.s3);
  } catch (const std::exception& e) {
    d.error =
        "removing " + c.prefix + " of " + config_.cacheUri + ": " + e.what();
  }
  return d;
}

void DirectUploads::sweepKeeping(const Cleanup& c, store::S3CacheStorage& s3) {
  auto kept = [&](const std::string& key) {
    auto it = c.keep.upper_bound(key);
    return it != c.keep.begin() && key.starts_with(*std::prev(it));
  };
  if (c.prefix == "staging/")
    for (auto& [key, id] : s3.listMultipartUploads(c.prefix))
      if (!kept(key)) s3.abortMultipart(key, id);
  size_t n = 0;
  if (c.keep.empty()) {
    n = s3.removePrefix(c.prefix);
  } else {
    for (auto& key : s3.list(c.prefix))
      if (!kept(key)) {
        s3.remove(key);
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
