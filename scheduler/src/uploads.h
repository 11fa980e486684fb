#pragma once
// Outputs uploaded by workers (docs/protocol.md, "Transfers"; design
// decision 6): an upload is accepted only for an expected output of a step
// running on that worker, written to an unlinked temporary file while the
// transfer endpoint hashes it and this scans it for references (to the
// step's input closure and its own outputs: what the scan finds is
// registered, whatever the worker reported), and committed (Uploads::commit) to
// the registrar thread, which adds it to the central store (verifying the NAR
// once more, and the content of a fixed output against its declared hash,
// recording `ca`) and records its DerivationOutputs row. The registrar's
// reports go back to the running steps. Service thread only, except the
// registrar's own thread and store handle.

#include <memory>
#include <string>

#include "kiln/protocol/transfer.h"
#include "kiln/scheduler/metrics.h"
#include "kiln/scheduler/registrar.h"
#include "kiln/scheduler/service.h"
#include "kiln/store/local_store.h"
#include "running_steps.h"
#include "temp_files.h"
#include "worker_link.h"

namespace kiln::scheduler {

/// Receives outputs. Borrows the running steps and the metrics, which
/// must outlive it; owns the registrar and its store handle.
class Uploads {
 public:
  /// Opens the registrar's own handle on the central store of `config`.
  Uploads(const ServiceConfig& config, RunningSteps& steps,
          ServiceMetrics& metrics);

  /// The target of an upload `from` announced. Throws Error (the transfer
  /// is refused) unless `h` names an expected output of a step running on
  /// `from` within the output limit, and twice its NAR size plus the
  /// reserve (ServiceConfig::minFreeDiskBytes) is free on the disk.
  std::unique_ptr<protocol::TransferTarget> accept(
      const WorkerConn& from, const protocol::TransferHeader& h);
  /// The step `step` running on `from` of which `info` is output `output`
  /// at exactly its path, within the output limit; throws Error saying
  /// why not otherwise.
  const RunningStep& expectedOutput(const WorkerConn& from, uint64_t step,
                                    const std::string& output,
                                    const protocol::PathInfo& info) const;
  /// Output `output` of step `step`, verified and published by a direct
  /// upload (direct_uploads.h; RunningSteps::outputRegistering was
  /// called), its NAR in `nar` from offset 0: to the registrar, which
  /// trusts the verifier's NarHash, size, references and CA check (the
  /// scheduler's own, on these bytes) and does not hash it again.
  void registerVerified(int64_t step, const std::string& output,
                        store::ValidPathInfo info, AutoCloseFD nar);
  /// Hands the registrar's reports to the running steps; returns how many
  /// outputs were registered.
  size_t takeRegistrations();
  /// Readable while registrar reports wait (poll it with the transport).
  int wakeFd() const { return registrar_.wakeFd(); }

 private:
  /// A verified upload (size and NAR hash checked by the endpoint) of
  /// output `h.outputName` of step `step`: to the registrar. Registered even
  /// if the step was dropped meanwhile: a retry elsewhere then finds it.
  void commit(int64_t step, const protocol::TransferHeader& h,
              store::ValidPathInfo info, AutoCloseFD nar);
  /// Logs and counts a report of `worker` whose references are not the
  /// `scanned` ones (fewer, extra or foreign).
  void checkReportedReferences(const std::string& worker,
                               const protocol::TransferHeader& h,
                               const store::StorePathSet& scanned);

  /// Throws Error unless `h`'s NAR fits on the disk of the state
  /// directory.
  void checkDiskSpace(const protocol::TransferHeader& h) const;

  uint64_t outputLimitBytes_;
  bool rehashVerified_;  ///< ServiceConfig::directRehash
  uint64_t minFreeDiskBytes_;
  const DiskSpace& disk_;
  std::string tmpDir_;
  store::StoreDir storeDir_;  // printing and parsing on the service thread
  RunningSteps& steps_;
  ServiceMetrics& metrics_;
  TempNames temps_;
  store::LocalStore store_;  // the registrar thread's handle
  Registrar registrar_;
};

}  // namespace kiln::scheduler
