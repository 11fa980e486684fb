// The worker daemon's direct uploads (docs/protocol.md "Direct uploads"):
// StageRequest → StageGrant → compress and PUT on a thread of its own →
// OutputStaged (then the StepResult, once every output is staged) → Ack.
// A refused StageRequest falls back to UploadOutput.
#include <unistd.h>

#include <csignal>

#include "daemon_impl.h"
#include "direct_upload.h"
#include "kiln/common/logging.h"
#include "kiln/common/trace.h"

namespace kiln::worker {

namespace proto = protocol;

namespace {
// How long a journaled upload may wait for a restart: the scheduler gives
// a step back long before (its worker lost, or the step's timeout).
constexpr std::chrono::seconds kJournalMaxAge = std::chrono::hours(24);
}  // namespace

proto::StageRequest Daemon::Impl::stageRequest(Step& s,
                                               const std::string& output,
                                               const proto::PathInfo& info) {
  proto::StageRequest req{s.msg.stepId, output, info, cfg.directUploads, ""};
  if (auto r = s.resumable.find(output);
      r != s.resumable.end() && r->second.grant.compression == req.compression)
    req.resumeUploadId = r->second.grant.uploadId;
  return req;
}

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
  std::optional<JournaledOutput> resume;
  if (auto r = s.resumable.find(g.outputName); r != s.resumable.end()) {
    resume = std::move(r->second);
    s.resumable.erase(r);
  }
  traceEvent("worker", "staging", g.stepId, g.outputName);
  s.uploaders.emplace_back([this, g, out = std::move(out), corrupt,
                            resume = std::move(resume)] {
    StagedEvent e{g.stepId, {}, ""};
    try {
      e.staged = stage(g, out, corrupt, resume);
    } catch (const std::exception& ex) {
      e.error = "staging " + g.outputName + " at " + g.key + ": " + ex.what();
    }
    postEvent(std::move(e));
  });
}

proto::OutputStaged Daemon::Impl::stage(
    const proto::StageGrant& g, const PreparedOutput& out, bool corrupt,
    const std::optional<JournaledOutput>& resume) {
  proto::OutputStaged m{g.stepId, g.outputName,
                        g.key,    g.compression,
                        out.info, Hash(HashAlgo::kSha256),
                        0,        {}};
  unsigned killAfter = cfg.debug.killAfterParts;
  StageProgress progress = [&](const StagedObject& o, bool complete) {
    m.fileHash = o.fileHash;
    m.fileSize = o.fileSize;
    m.etags = o.etags;
    journal->recordProgress(m, complete);
    if (killAfter && !complete && m.etags.size() >= killAfter) {
      logWarn("worker: killing itself with " + std::to_string(m.etags.size()) +
              " parts of " + g.key + " up (--debug-kill-after-parts)");
      ::raise(SIGKILL);
    }
  };
  std::string object = journal->objectPath(g.stepId, g.outputName);
  if (resume && resume->progress && resume->grant.key == g.key) {
    const auto& p = *resume->progress;
    try {
      journal->recordGrant(g, true);
      auto reuse = reusableParts(resume->grant, p.etags, p.fileSize, g);
      size_t skipped = 0;
      for (auto& e : reuse) skipped += !e.empty();
      logInfo("worker: resuming the upload of " + g.key + " (" +
              std::to_string(skipped) + " parts up already)");
      resumeStaging(g, object, {p.fileHash, p.fileSize, {}}, std::move(reuse),
                    progress);
      return m;
    } catch (const std::exception& e) {
      logWarn("worker: cannot resume the upload of " + g.key + ": " + e.what() +
              "; staging it again");
    }
  }
  journal->recordGrant(g, false);
  stageOutput(g, out.nar.get(), object, corrupt, progress);
  return m;
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

void Daemon::Impl::journalStep(Step& s) {
  proto::StepResult built = *s.built;
  built.outputs = s.builtOutputs;
  journal->beginStep(s.msg.stepId, store.storeDir().printPath(s.msg.drvPath),
                     built);
}

void Daemon::Impl::eraseStep(
    std::map<uint64_t, std::unique_ptr<Step>>::iterator it) {
  uint64_t id = it->first;
  steps.erase(it);  // joins its uploaders first
  journal->forget(id);
}

void Daemon::Impl::restoreJournal() {
  auto held = journal->load(store.storeDir(), kJournalMaxAge,
                            std::chrono::system_clock::now());
  for (auto& [id, j] : held) {
    bool valid = true;
    for (auto& o : j.result.outputs)
      valid = valid && store.isValid(o.info.path);
    if (!valid) {
      logWarn("worker: step " + std::to_string(id) +
              " of the upload journal has outputs no longer in this store");
      journal->forget(id);
      continue;
    }
    auto s = std::make_unique<Step>();
    s->msg.stepId = id;
    s->msg.drvPath = j.drvPath;
    s->phase = Step::Phase::kReporting;
    s->builtOutputs = j.result.outputs;
    s->built = std::move(j.result);
    s->built->outputs.clear();
    s->result = *s->built;
    for (auto& [name, o] : j.outputs) {
      if (o.complete)
        s->staged[name] = *o.progress;
      else if (o.progress)
        s->resumable[name] = std::move(o);
    }
    logInfo("worker: step " + std::to_string(id) + " built " +
            std::string(s->msg.drvPath.name()) + " before a restart; " +
            std::to_string(s->staged.size()) + " outputs staged, " +
            std::to_string(s->resumable.size()) +
            " partly: held for the scheduler");
    steps.emplace(id, std::move(s));
  }
}

}  // namespace kiln::worker
