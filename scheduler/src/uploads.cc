// Outputs uploaded by workers (uploads.h).
#include "uploads.h"

#include <unistd.h>

#include "kiln/common/logging.h"
#include "kiln/common/trace.h"
#include "kiln/store/refs.h"

namespace kiln::scheduler {

namespace proto = protocol;

namespace {

// An upload being received into an unlinked temporary file and, in the
// same pass, scanned for the hash parts of the paths it may refer to
// (RefScanSink: the endpoint already hashes every chunk, so no second
// sha256 and no second read). Once the endpoint verified its size and NAR
// hash, `onCommit` gets the registration (the travelled metadata, with the
// step's .drv as deriver and the scanned references), the references the
// worker reported, and the file from offset 0.
class UploadTarget final : public proto::TransferTarget {
 public:
  using OnCommit = std::function<void(const proto::TransferHeader&,
                                      store::ValidPathInfo, AutoCloseFD)>;
  UploadTarget(const std::string& tmp, store::StorePath deriver,
               store::StorePathSet candidates, OnCommit onCommit)
      : tmp_(tmp),
        deriver_(std::move(deriver)),
        candidates_(std::move(candidates)),
        scan_(candidates_),
        onCommit_(std::move(onCommit)),
        fd_(openUnlinkedTemp(tmp_)) {}
  void write(std::string_view data) override {
    writeAll(fd_.get(), data);
    scan_.write(data);
  }
  void commit(const proto::TransferHeader& h) override {
    if (lseek(fd_.get(), 0, SEEK_SET) < 0) throwSysError("lseek " + tmp_);
    store::ValidPathInfo info = proto::toValidPathInfo(h.info);
    info.deriver = deriver_;  // the step's .drv, whatever the worker says
    info.references = store::selectReferences(candidates_, scan_.found());
    info.ultimate = true;
    onCommit_(h, std::move(info), std::move(fd_));
  }
  void discard(const std::string&) noexcept override { fd_.reset(); }

 private:
  std::string tmp_;
  store::StorePath deriver_;
  store::StorePathSet candidates_;
  store::RefScanSink scan_;
  OnCommit onCommit_;
  AutoCloseFD fd_;
};

// "a, b" of the base names in `a` and not in `b`.
std::string missingFrom(const store::StorePathSet& a,
                        const store::StorePathSet& b) {
  std::string s;
  for (auto& p : a)
    if (!b.count(p)) s += (s.empty() ? "" : ", ") + p.baseName();
  return s.empty() ? "none" : s;
}

}  // namespace

Uploads::Uploads(const ServiceConfig& config, RunningSteps& steps,
                 ServiceMetrics& metrics)
    : outputLimitBytes_(config.outputLimitBytes),
      rehashVerified_(config.directRehash),
      minFreeDiskBytes_(config.minFreeDiskBytes),
      disk_(config.diskSpace ? *config.diskSpace : RealDiskSpace::instance()),
      tmpDir_(config.stateDir + "/tmp"),
      storeDir_(config.storeDir),
      steps_(steps),
      metrics_(metrics),
      temps_(config.stateDir + "/tmp", "up"),
      store_(config.stateDir, store::StoreDir(config.storeDir)),
      registrar_([this](const Registration& r, Source& nar) {
        registerUpload(store_, r, nar);
      }) {
  // Before the first submit (which synchronises with the registrar thread).
  if (!config.syncStoreFiles)
    store_.setContentSync(store::LocalStore::ContentSync::kNone);
}

const RunningStep& Uploads::expectedOutput(const WorkerConn& from,
                                           uint64_t step,
                                           const std::string& output,
                                           const proto::PathInfo& info) const {
  int64_t id = static_cast<int64_t>(step);
  const RunningStep* run = steps_.find(id, from.peer);
  if (!run)
    throw Error("step " + std::to_string(id) +
                " is not running on this worker");
  auto ex = run->expected.find(output);
  if (ex == run->expected.end() || ex->second != info.path)
    throw Error("output '" + output + "' of " + run->drvPath + " is not " +
                storeDir_.printPath(info.path));
  if (outputLimitBytes_ && info.narSize > outputLimitBytes_)
    throw Error("output " + storeDir_.printPath(info.path) + " of " +
                std::to_string(info.narSize) +
                " bytes exceeds the output limit of " +
                std::to_string(outputLimitBytes_) + " bytes");
  return *run;
}

std::unique_ptr<proto::TransferTarget> Uploads::accept(
    const WorkerConn& from, const proto::TransferHeader& h) {
  int64_t id = static_cast<int64_t>(h.stepId);
  const RunningStep* run = &expectedOutput(from, h.stepId, h.outputName, h.info);
  checkDiskSpace(h);
  auto fixed = run->fixedCa.find(h.outputName);
  std::string ca = fixed == run->fixedCa.end() ? "" : fixed->second;
  return std::make_unique<UploadTarget>(
      temps_.next(), storeDir_.parsePath(run->drvPath),
      steps_.referenceCandidates(id),
      [this, id, ca, worker = from.name](const proto::TransferHeader& hd,
                                         store::ValidPathInfo info,
                                         AutoCloseFD nar) {
        info.ca = ca;
        checkReportedReferences(worker, hd, info.references);
        commit(id, hd, std::move(info), std::move(nar));
      });
}

void Uploads::checkDiskSpace(const proto::TransferHeader& h) const {
  // The temporary file, then the store's copy, while the first exists.
  uint64_t size = h.info.narSize;
  uint64_t need = size > (UINT64_MAX - minFreeDiskBytes_) / 2
                      ? UINT64_MAX
                      : 2 * size + minFreeDiskBytes_;
  uint64_t free = disk_.available(tmpDir_);
  if (free < need)
    throw Error("output " + storeDir_.printPath(h.info.path) + " of " +
                std::to_string(size) + " bytes does not fit on the " +
                "scheduler's disk: " + std::to_string(free) + " bytes free, " +
                std::to_string(need) + " needed (twice the NAR plus the " +
                "reserve of " + std::to_string(minFreeDiskBytes_) + ")");
}

void Uploads::checkReportedReferences(const std::string& worker,
                                      const proto::TransferHeader& h,
                                      const store::StorePathSet& scanned) {
  if (h.info.references == scanned) return;
  metrics_.countReferenceMismatch();
  logWarn("worker " + worker + " misreported the references of " +
          storeDir_.printPath(h.info.path) + " (registered as scanned): " +
          "found and not reported: " + missingFrom(scanned, h.info.references) +
          "; reported and not found or not allowed: " +
          missingFrom(h.info.references, scanned));
}

void Uploads::commit(int64_t step, const proto::TransferHeader& h,
                     store::ValidPathInfo info, AutoCloseFD nar) {
  metrics_.addBytesReceived(h.info.narSize);
  if (steps_.isRepeat(step)) {  // a check's build: kept aside, compared
    steps_.keepRepeatOutput(step, h.outputName,
                            info.narHash.to(HashFormat::kNix32),
                            std::move(nar));
    return;
  }
  steps_.outputRegistering(step, h.outputName);
  traceEvent("scheduler", "upload-received", static_cast<uint64_t>(step),
             h.outputName);
  // A fixed output refers to nothing (Nix refuses one whose scan finds a
  // reference); the store checks its content against `ca` as it adds it.
  if (!info.ca.empty() && !info.references.empty()) {
    steps_.outputRejected(step, h.outputName,
                          "illegal path references in fixed-output " +
                              storeDir_.printPath(info.path));
    return;
  }
  registrar_.submit({step, h.outputName, std::move(info), std::move(nar)});
}

void Uploads::registerVerified(int64_t step, const std::string& output,
                               store::ValidPathInfo info, AutoCloseFD nar) {
  registrar_.submit(
      {step, output, std::move(info), std::move(nar), !rehashVerified_});
}

size_t Uploads::takeRegistrations() {
  size_t registered = 0;
  for (auto& d : registrar_.takeDone()) {
    if (d.rejected) {
      logError("output " + d.output + " of step " + std::to_string(d.step) +
               " rejected: " + d.error);
      steps_.outputRejected(d.step, d.output, d.error);
      continue;
    }
    if (!d.error.empty())
      logError("registering output " + d.output + " of step " +
               std::to_string(d.step) + ": " + d.error);
    steps_.outputRegistered(d.step, d.output, d.error.empty());
    if (d.error.empty()) ++registered;
  }
  return registered;
}

}  // namespace kiln::scheduler
