#pragma once
// Direct uploads (docs/protocol.md "Direct uploads", issue 32): workers PUT
// their compressed outputs to `staging/` keys of the farm's bucket through
// presigned URLs; the farm verifies each one before anything of it is
// visible. The service thread handles the messages (StageRequest,
// OutputStaged) and the ends of attempts; verifier threads
// (ServiceConfig::directVerifyThreads, direct_verifier.cc) do all the
// object-store work, the jobs of one step one at a time and in order:
// presigning grants (a multipart upload is
// started on the store), completing multipart uploads, reading a staged
// object once (store::verifyStaged: file hash and size, bounded
// decompression, NAR validity, NAR hash and size, references among the
// step's input closure and own outputs, a fixed output's hash) while the
// NAR goes to a temporary file, publishing it (server-side copy to its
// final key, signed narinfo last: store::publishStaged), and removing the
// staging objects of ended attempts (and, at start, everything left under
// `staging/` but the attempts a restarted scheduler may adopt, whose
// workers re-announce what they staged). A verified output goes to the central
// store through the registrar (Uploads::registerVerified), as an upload over
// ZeroMQ does, but is not hashed again there: the verifier hashed it.

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "direct_upload_metrics.h"
#include "kiln/common/clock.h"
#include "kiln/common/file.h"
#include "kiln/common/sync.h"
#include "kiln/protocol/messages.h"
#include "kiln/scheduler/service.h"
#include "kiln/store/binary_cache.h"
#include "kiln/store/staged_upload.h"
#include "running_steps.h"
#include "step_ordered_queue.h"
#include "temp_files.h"
#include "uploads.h"
#include "worker_link.h"

namespace kiln::scheduler {

/// The farm's side of direct uploads. Borrows the steps, the uploads and
/// the link (all must outlive it); owns the verifier threads and their
/// handles on the bucket; registers the `kiln_direct_*` metrics in the
/// registry given (which must outlive it).
class DirectUploads {
 public:
  /// Starts the verifier threads (start() queues their first job).
  /// Throws FormatError/Error unless `config.cacheUri` is an s3:// URI
  /// with credentials.
  DirectUploads(const ServiceConfig& config, RunningSteps& steps,
                Uploads& uploads, WorkerLink& link, const Clock& clock,
                prometheus::Registry& registry);
  /// Finishes the jobs under way, drops the rest, joins the threads.
  ~DirectUploads();
  DirectUploads(const DirectUploads&) = delete;
  DirectUploads& operator=(const DirectUploads&) = delete;

  /// The scheduler starts: everything under `staging/` goes (objects and
  /// unfinished multipart uploads) but the staging of `adoptable`
  /// attempts (step, attempt): steps dispatched before a restart, whose
  /// workers may come back by `until` and re-announce what they staged
  /// (an OutputStaged with the key derived from the attempt). What of
  /// them is not adopted by then goes at the first tick() past `until`.
  void start(std::set<std::pair<int64_t, int64_t>> adoptable, WallTime until);
  /// Removes the staging kept by start() of attempts not running now,
  /// once `now` is past its `until` (an adopted one goes when it ends).
  void tick(WallTime now);
  /// A worker asks to stage an output: granted (on the verifier thread)
  /// if it is an expected output of a step running on `from` within the
  /// output limit; refused with an Ack otherwise.
  void onStageRequest(const WorkerConn& from, const protocol::StageRequest& m);
  /// A worker says it staged an output at the key it was granted: queued
  /// for verification (the output counts as registering meanwhile).
  void onOutputStaged(const WorkerConn& from, const protocol::OutputStaged& m);
  /// Attempt `attempt` of step `step` ended: its staging objects (and
  /// unfinished multipart uploads) go, after the jobs queued before.
  void attemptEnded(int64_t step, int64_t attempt);
  /// Applies the verifier's reports: grants sent, verified outputs to the
  /// registrar, refused ones failed; the workers' Acks.
  void takeDone();
  /// Readable while reports wait.
  int wakeFd() const { return wake_.get(); }

  /// The staging key of output `output` of attempt `attempt` of `step`.
  static std::string stagingKey(int64_t step, int64_t attempt,
                                const std::string& output,
                                const std::string& compression);

 private:
  /// The step of a cleanup of all of `staging/`, which runs alone.
  static constexpr int64_t kAllSteps = -1;
  static_assert(kAllSteps == StepOrderedQueue<int>::kAllSteps);
  static std::string attemptPrefix(int64_t step, int64_t attempt);
  struct Grant {
    std::string peer;
    int64_t step = 0, attempt = 0;
    std::string output, compression;
    uint64_t narSize = 0;
    /// A restarted worker's multipart upload to go on with, if the store
    /// still holds it at this attempt's key.
    std::string resumeUploadId;
  };
  struct Verify {
    std::string peer;
    int64_t step = 0, attempt = 0;
    std::string output;
    store::StagedOutput staged;
    std::string uploadId;
    std::vector<std::string> etags;
    Hash fileHash{HashAlgo::kSha256};
    uint64_t fileSize = 0;
  };
  struct Cleanup {
    std::string prefix;  ///< "staging/" at start
    std::vector<std::pair<std::string, std::string>> uploads;
    std::set<std::string> keep;  ///< prefixes under `prefix` that stay
    int64_t step = kAllSteps;    ///< the step whose staging goes
  };
  using Job = std::variant<Grant, Verify, Cleanup>;
  struct Done {
    enum class Kind { kGrant, kVerify, kCleanup } kind = Kind::kCleanup;
    std::string peer;
    int64_t step = 0, attempt = 0;
    std::string output;
    protocol::StageGrant grant;  ///< a Grant's
    std::string error;           ///< empty on success
    bool rejected = false;       ///< content not as declared
    store::ValidPathInfo info{
        store::StorePath("00000000000000000000000000000000-x")};
    AutoCloseFD nar;  ///< a verified output's NAR, from offset 0
  };
  /// A granted staging: what OutputStaged must name.
  struct Granted {
    int64_t attempt = 0;
    std::string key, compression, uploadId;
  };

  /// A verifier thread: its handle on the bucket, its temporary names.
  struct Verifier {
    std::unique_ptr<store::S3CacheStorage> s3;
    TempNames temps;
    std::thread thread;
  };
  static int64_t stepOf(const Job& job);
  void submit(Job job);
  /// takeDone() of a grant and of a verification.
  void granted(Done& d);
  void verified(Done& d);
  void run(Verifier& self) noexcept;
  Done handle(Grant& g, Verifier& self);
  Done handle(Verify& v, Verifier& self);
  Done handle(Cleanup& c, Verifier& self);
  /// Fills `m` (key and compression set) for `g`: URLs of a single PUT,
  /// or of the parts of a multipart upload (the one `g` resumes if the
  /// store still holds it, with its parts uploaded so far).
  void presign(const Grant& g, protocol::StageGrant& m,
               store::S3CacheStorage& s3);
  /// Whether the store holds upload `id` of `key`, unfinished.
  static bool holdsUpload(store::S3CacheStorage& s3, const std::string& key,
                          const std::string& id);
  /// The verified NAR of `v` in an unlinked file of the state's tmp/.
  Done verify(Verify& v, Verifier& self);
  void refuse(const std::string& peer, protocol::MessageType subject,
              uint64_t step, const std::string& why);
  /// The staging `m` names when no grant of this scheduler is known: an
  /// adopted step's, re-announced after a restart or a fail-over, at the
  /// key derived from its attempt; nullopt if it is not that.
  std::optional<std::pair<int64_t, std::string>> derivedStaging(
      const RunningStep& run, const protocol::OutputStaged& m) const;
  /// The verification of `m`, staged for `run` as `gr` says.
  Verify verifyJob(const WorkerConn& from, const RunningStep& run,
                   const protocol::OutputStaged& m, const Granted& gr);
  /// Removes what `c` names, keeping `c.keep`.
  static void sweepKeeping(const Cleanup& c, store::S3CacheStorage& s3);
  /// Completes the multipart upload of `v`; with no upload id (a
  /// re-announced staging) the one the store lists for its key, if any.
  static void completeUpload(const Verify& v, store::S3CacheStorage& s3);

  const ServiceConfig& config_;
  RunningSteps& steps_;
  Uploads& uploads_;
  WorkerLink& link_;
  const Clock& clock_;
  store::StoreDir storeDir_;
  std::string tmpDir_;
  /// (step, output) → its grant; service thread only.
  std::map<std::pair<int64_t, std::string>, Granted> granted_;
  /// start()'s adoptable attempts and until when; service thread only.
  std::set<std::pair<int64_t, int64_t>> kept_;
  WallTime keptUntil_{};
  struct State {
    StepOrderedQueue<Job> queue;
    std::vector<Done> done;
    bool stop = false;
  };
  Sync<State> state_;
  DirectUploadMetrics metrics_;
  AutoCloseFD wake_;
  std::vector<std::unique_ptr<Verifier>> verifiers_;
};

}  // namespace kiln::scheduler
