#pragma once
/// Outputs a worker uploads straight to the farm's object store (issue 32,
/// stage 2): the worker PUTs its compressed NAR to a presigned staging key
/// (`S3CacheStorage::presignPut`); nothing of it is trusted until
/// verifyStaged() has read it once, as it streams, and found what the farm
/// expects; publishStaged() then moves it to its final key on the object
/// store's side and writes the signed narinfo last. The scheduler's side
/// is scheduler/src/direct_uploads.h (docs/protocol.md, "Direct
/// uploads").

#include <string>

#include "kiln/store/binary_cache.h"
#include "kiln/store/compression.h"
#include "kiln/store/content_check.h"
#include "kiln/store/local_store.h"
#include "kiln/store/narinfo.h"

namespace kiln::store {

/// An output in staging and what is claimed of it.
struct StagedOutput {
  std::string key;                   ///< the staging key (`staging/…`)
  std::string compression = "zstd";  ///< zstd, xz or none
  /// The path, its NarHash and NarSize (as the worker hashed them), its
  /// deriver, and the CA field a fixed output declares (empty otherwise).
  /// Its references are not used: the scan decides them.
  ValidPathInfo claimed{StorePath("00000000000000000000000000000000-x")};
  /// Reference candidates: the step's input closure and its own outputs.
  StorePathSet candidates;
};

/// The staged NAR is not the one claimed (its NarHash or NarSize differ):
/// a corrupt or wrong upload, as opposed to a fixed output whose content is
/// not what its derivation declares (a plain ContentMismatchError).
class StagedNarMismatchError : public ContentMismatchError {
 public:
  using ContentMismatchError::ContentMismatchError;
};

/// What verifyStaged() found: the narinfo's facts.
struct StagedVerdict {
  Hash fileHash{HashAlgo::kSha256};  ///< sha256 of the compressed object
  uint64_t fileSize = 0;
  StorePathSet references;  ///< the candidates the NAR refers to
};

/// Reads `staged.key` from `storage` once: hashes and counts the
/// compressed bytes, decompresses them (bounded by `limits`), validates
/// the NAR, hashes it and scans it for references, and checks that nothing
/// follows it; a fixed output's content address is checked too (a flat
/// one with a second read). Throws StagedNarMismatchError when NarHash or
/// NarSize is not what is claimed, ContentMismatchError when the content
/// address is not, FormatError for
/// a corrupt or truncated object, Error when it is missing or the storage
/// fails. With `narCopy`, the decompressed NAR also goes there as it
/// streams (e.g. a file the farm's central store then adds it from).
StagedVerdict verifyStaged(CacheStorage& storage, const StoreDir& dir,
                           const StagedOutput& staged,
                           const DecompressionLimits& limits = {},
                           Sink* narCopy = nullptr);

/// Publishes a verified staged object: copies it to
/// `nar/<file hash>.nar<ext>` on the object store's side (unless that key
/// exists: identical content), deletes the staged key, then writes the
/// narinfo (references as scanned; signed with `signingKey` unless null)
/// last. Returns the narinfo.
NarInfo publishStaged(S3CacheStorage& s3, const StoreDir& dir,
                      const StagedOutput& staged, const StagedVerdict& verdict,
                      const SecretKey* signingKey);

}  // namespace kiln::store
