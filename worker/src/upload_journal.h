#pragma once
// The worker's journal of its direct uploads (docs/protocol.md "Resuming
// a multipart upload"): what a worker process restarted mid-upload needs
// to go on without building again. Under `<stateDir>/direct/<stepId>/`:
// `drv` (the step's .drv), `result` (its successful StepResult, outputs
// as built), and per output the grant it stages under (`NAME.grant`), its
// progress (`NAME.progress`: the compressed object's hash and size, the
// ETags of the parts uploaded so far), `NAME.staged` once every byte is
// up, and the compressed object itself (`NAME.object`). Records are the
// protocol's own encodings, so loading validates them as a message from
// the network is; nothing in them is trusted beyond that: the scheduler
// checks the step, the key and the upload, and verifies every byte.

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "kiln/protocol/messages.h"
#include "kiln/store/store_path.h"

namespace kiln::worker {

/// One output's direct upload as journaled.
struct JournaledOutput {
  /// The grant staged under (its `urls` are not kept: they expire).
  protocol::StageGrant grant;
  /// The object's hash and size, the ETags of the parts up so far.
  std::optional<protocol::OutputStaged> progress;
  bool complete = false;  ///< every byte is up: `progress` is the message
};

/// A step whose build succeeded and whose outputs go up directly.
struct JournaledStep {
  store::StorePath drvPath{"00000000000000000000000000000000-x.drv"};
  protocol::StepResult result;  ///< outputs: those built
  std::map<std::string, JournaledOutput> outputs;
};

/// The journal, in a directory of its own. Writes replace a record
/// atomically (a file renamed over the last one), so a process killed at
/// any point leaves either record. Not thread-safe for one output; the
/// records of distinct outputs may be written from distinct threads.
class UploadJournal {
 public:
  /// Creates `dir` if needed.
  explicit UploadJournal(std::string dir);

  /// Step `step` (of `drvPath`) built `result` and stages its outputs.
  void beginStep(uint64_t step, const std::string& drvPath,
                 const protocol::StepResult& result);
  /// Where output `output` of `step`'s compressed object is kept.
  std::string objectPath(uint64_t step, const std::string& output) const;
  /// `grant` is the one its output stages under; unless `keepProgress`
  /// (a resumption), any earlier progress of that output is forgotten.
  void recordGrant(const protocol::StageGrant& grant, bool keepProgress);
  /// What is up of `m.outputName` of `m.stepId` (all of it: `complete`).
  void recordProgress(const protocol::OutputStaged& m, bool complete);
  /// Forgets everything of `step` (its objects too).
  void forget(uint64_t step);
  /// The journaled steps. A step whose records do not decode, or whose
  /// `result` is older than `maxAge`, is removed (logged), as is anything
  /// else in the directory; an output's unreadable record is dropped.
  std::map<uint64_t, JournaledStep> load(
      const store::StoreDir& storeDir, std::chrono::seconds maxAge,
      std::chrono::system_clock::time_point now);

 private:
  std::string stepDir(uint64_t step) const;
  std::optional<JournaledStep> loadStep(const std::string& dir,
                                        const store::StoreDir& storeDir);
  std::string dir_;
};

}  // namespace kiln::worker
