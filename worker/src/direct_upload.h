#pragma once
// The worker's side of direct uploads (docs/protocol.md "Direct
// uploads"): compress an output's NAR into a temporary file, hashing it,
// then PUT it to the presigned URL(s) of a StageGrant. Runs on a thread
// of its own (the socket loop never waits on the object store).

#include <functional>
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

/// Told what is up after the compression (no part yet) and after each
/// part (`etags`: the parts up so far, in order), then once all of it is
/// (`complete`); from the uploading thread. May throw (the staging fails).
using StageProgress =
    std::function<void(const StagedObject& upSoFar, bool complete)>;

/// Compresses the NAR read from `narFd` (from its current offset) with
/// `grant.compression` into `objectPath` (created or truncated: kept for
/// a resumption until the step is over) and PUTs it as `grant` says (each
/// part tried up to three times: a dropped connection costs one part).
/// With `corrupt`, one byte of the NAR is flipped before compression
/// (fault injection: the farm must refuse it). Memory stays the codec's
/// window and curl's buffer. Throws Error.
StagedObject stageOutput(const protocol::StageGrant& grant, int narFd,
                         const std::string& objectPath, bool corrupt,
                         const StageProgress& progress);

/// The ETags of parts of `before` (the grant an upload began under, whose
/// parts `etags` are up) that `now` (a grant resuming it) lets the worker
/// skip, by part index ("" where the part goes up again): same upload id
/// and part size, and the store lists the part with that ETag and size.
std::vector<std::string> reusableParts(const protocol::StageGrant& before,
                                       const std::vector<std::string>& etags,
                                       uint64_t fileSize,
                                       const protocol::StageGrant& now);

/// Goes on with an upload whose object was compressed already into
/// `objectPath` (`done`: its hash and size, and `reuse`, the ETags of
/// the parts to skip by index, from reusableParts()). The file is hashed
/// first: one that is not what `done` says is refused (Error).
StagedObject resumeStaging(const protocol::StageGrant& grant,
                           const std::string& objectPath,
                           const StagedObject& done,
                           std::vector<std::string> reuse,
                           const StageProgress& progress);

}  // namespace kiln::worker
