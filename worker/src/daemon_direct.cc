// The worker daemon's direct uploads (docs/protocol.md "Direct uploads"):
// StageRequest → StageGrant → compress and PUT on a thread of its own →
// OutputStaged (then the StepResult, once every output is staged) → Ack.
// A refused StageRequest falls back to UploadOutput.
#include <unistd.h>

#include "daemon_impl.h"
#include "direct_upload.h"
#include "kiln/common/logging.h"
#include "kiln/common/trace.h"

namespace kiln::worker {

namespace proto = protocol;

void Daemon::Impl::onStageGrant(const proto::StageGrant& g) {
  auto it = steps.find(g.stepId);
  if (it == steps.end()) return;
  Step& s = *it->second;
  auto o = s.awaitingGrant.find(g.outputName);
  if (o == s.awaitingGrant.end()) {
    logWarn("worker: a StageGrant for output " + g.outputName + " of step " +
            std::to_string(g.stepId) + " that waits for none");
    return;
  }
  PreparedOutput out = std::move(o->second);
  s.awaitingGrant.erase(o);
  bool corrupt = cfg.debug.corruptUploads > 0;
  if (corrupt) {
    cfg.debug.corruptUploads--;
    logWarn("worker: corrupting the direct upload of " + g.outputName +
            " (--debug-corrupt-uploads)");
  }
  traceEvent("worker", "staging", g.stepId, g.outputName);
  s.uploaders.emplace_back([this, g, out = std::move(out), corrupt] {
    StagedEvent e{g.stepId, {}, ""};
    try {
      auto staged = stageOutput(g, out.nar.get(), tmpDir, corrupt);
      e.staged = proto::OutputStaged{
          g.stepId, g.outputName,    g.key,           g.compression,
          out.info, staged.fileHash, staged.fileSize, staged.etags};
    } catch (const std::exception& ex) {
      e.error = "staging " + g.outputName + " at " + g.key + ": " + ex.what();
    }
    postEvent(std::move(e));
  });
}

void Daemon::Impl::onStaged(StagedEvent& e) {
  auto it = steps.find(e.stepId);
  if (it == steps.end()) return;
  Step& s = *it->second;
  if (s.phase != Step::Phase::kUploading) return;  // given up meanwhile
  proto::BuiltOutput built{e.staged.outputName, e.staged.info};
  if (!e.error.empty()) {
    logWarn("worker: " + e.error);
    return outputDone(s, built, e.error);
  }
  if (cfg.debug.exitAfterStaging) {
    logWarn("worker: exiting after staging " + e.staged.key +
            " (--debug-exit-after-staging)");
    ::_exit(70);
  }
  s.staged[built.name] = e.staged;
  send(proto::Message(std::move(e.staged)));
  // The result need not wait for the farm's verdict: the scheduler holds
  // it until the output is verified, published and registered, and
  // retries the step if it is refused.
  traceEvent("worker", "uploaded", s.msg.stepId, built.name);
  outputDone(s, built, "");
}

void Daemon::Impl::onStageAck(Step& s, const proto::Ack& a) {
  if (a.subject == proto::MessageType::kStageRequest) {
    if (s.phase != Step::Phase::kUploading) return;
    // Refused: what waits for a grant goes over the connection.
    logInfo("worker: direct upload refused (" + a.error +
            "); uploading over the connection");
    auto waiting = std::move(s.awaitingGrant);
    s.awaitingGrant.clear();
    for (auto& [name, o] : waiting) uploadOverConnection(s, std::move(o));
    return;
  }
  // OutputStaged: the result went out already; a refusal makes the
  // scheduler retry the step.
  if (!a.ok)
    logWarn("worker: the farm refused a staged output of step " +
            std::to_string(a.id) + ": " + a.error);
}

}  // namespace kiln::worker
