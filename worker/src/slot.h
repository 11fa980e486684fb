#pragma once
// What one slot thread does for a step (docs/worker.md, "Daemon"): build
// with BuildRunner (or reuse outputs already in the worker's store),
// register the outputs in the worker's store and prepare each output's NAR
// in an unlinked temporary file for the upload. Never throws.

#include <string>
#include <vector>

#include "kiln/common/file.h"
#include "kiln/protocol/messages.h"
#include "kiln/store/local_store.h"
#include "kiln/worker/build_runner.h"

namespace kiln::worker {

/// One output ready to upload: its metadata and its NAR (file offset 0).
struct PreparedOutput {
  std::string name;
  protocol::PathInfo info;
  AutoCloseFD nar;
};

/// The end of a slot's work: the result to report (status, error, times;
/// outputs are filled in once uploaded) and the outputs to upload.
struct SlotOutcome {
  protocol::StepResult result;
  std::vector<PreparedOutput> outputs;
};

/// An unlinked temporary file in `dir` opened read-write. Throws SysError.
AutoCloseFD openUnlinkedTemp(const std::string& dir);

/// The NARs of `outputs`, registered in `store` by an earlier runSlot, to
/// upload them again (in the given order). Throws Error or SysError.
std::vector<PreparedOutput> prepareAgain(
    const std::vector<protocol::BuiltOutput>& outputs,
    store::LocalStore& store, const std::string& tmpDir);

/// Runs `request` with `runner`, then registers and prepares its outputs.
/// Failures of any kind become the result's status: build failures keep
/// BuildRunner's status, infrastructure errors give kAborted (the
/// scheduler retries those). `clock` stamps the result's times. `check`
/// (a reproducibility check, BuildStep::check): builds even when the
/// outputs could be reused, and leaves them unregistered (their NARs are
/// prepared, their trees removed); fails when an output is valid here.
SlotOutcome runSlot(const BuildRequest& request, uint64_t stepId,
                    BuildRunner& runner, store::LocalStore& store,
                    const std::string& tmpDir, const LogCallback& onLog,
                    const CancelFlag& cancel, const Clock& clock,
                    bool check = false);

}  // namespace kiln::worker
