#pragma once
// The worker's side of direct uploads (docs/protocol.md "Direct
// uploads"): compress an output's NAR into a temporary file, hashing it,
// then PUT it to the presigned URL(s) of a StageGrant. Runs on a thread
// of its own (the socket loop never waits on the object store).

#include <string>
#include <vector>

#include "kiln/common/hash.h"
#include "kiln/protocol/messages.h"

namespace kiln::worker {

/// What was staged: the compressed object's sha256 and size, and the
/// ETag of each part (multipart only).
struct StagedObject {
  Hash fileHash{HashAlgo::kSha256};
  uint64_t fileSize = 0;
  std::vector<std::string> etags;
};

/// Compresses the NAR read from `narFd` (from its current offset) with
/// `grant.compression` into an unlinked file under `tmpDir` and PUTs it
/// as `grant` says (each part tried up to three times: a dropped
/// connection costs one part). With `corrupt`, one byte of the NAR is
/// flipped before compression (fault injection: the farm must refuse
/// it). Memory stays the codec's window and curl's buffer. Throws Error.
StagedObject stageOutput(const protocol::StageGrant& grant, int narFd,
                         const std::string& tmpDir, bool corrupt);

}  // namespace kiln::worker
