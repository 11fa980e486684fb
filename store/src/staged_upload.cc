// Verifying and publishing what a worker staged in the object store
// (staged_upload.h).
#include "kiln/store/staged_upload.h"

#include "kiln/common/error.h"
#include "kiln/common/stream.h"
#include "kiln/store/content_address.h"
#include "kiln/store/content_check.h"
#include "kiln/store/nar.h"

namespace kiln::store {
namespace {

std::unique_ptr<Source> openStaged(CacheStorage& storage,
                                   const StagedOutput& staged) {
  auto file = storage.open(staged.key);
  if (!file)
    throw Error("staged object '" + staged.key + "' is missing from " +
                storage.uri());
  return file;
}

// The flat (or text) content hash of the staged NAR: a second read.
Hash flatContentHash(CacheStorage& storage, const StagedOutput& staged,
                     const ContentAddress& ca,
                     const DecompressionLimits& limits) {
  auto file = openStaged(storage, staged);
  auto nar = makeDecompressionSource(staged.compression, *file, limits);
  return contentHashOfNar(*nar, ca.method, ca.hash.algo());
}

}  // namespace

StagedVerdict verifyStaged(CacheStorage& storage, const StoreDir& dir,
                           const StagedOutput& staged,
                           const DecompressionLimits& limits, Sink* narCopy) {
  const auto& claimed = staged.claimed;
  std::string what = "staged output '" + dir.printPath(claimed.path) + "' (" +
                     staged.key + " in " + storage.uri() + ")";
  std::optional<ContentAddress> ca;
  if (!claimed.ca.empty()) ca = ContentAddress::parse(claimed.ca);
  std::optional<HashAlgo> recursive;
  if (ca && ca->method == CaMethod::kRecursive) recursive = ca->hash.algo();
  auto file = openStaged(storage, staged);
  HashingSink fileHasher(HashAlgo::kSha256);
  TeeSource counted(*file, fileHasher);
  auto decompressed =
      makeDecompressionSource(staged.compression, counted, limits);
  std::optional<TeeSource> copying;
  if (narCopy) copying.emplace(*decompressed, *narCopy);
  Source* nar = narCopy ? static_cast<Source*>(&*copying) : decompressed.get();
  auto candidates = staged.candidates;
  candidates.insert(claimed.path);
  NarScan scan;
  try {
    scan = scanNar(*nar, candidates, recursive);
    char extra;
    if (nar->read(&extra, 1) != 0) throw FormatError("data follows the NAR");
  } catch (const ContentMismatchError&) {
    throw;
  } catch (const FormatError& e) {
    throw FormatError(what + " is corrupt: " + e.what());
  }
  if (!(scan.narHash == claimed.narHash) || scan.narSize != claimed.narSize)
    throw StagedNarMismatchError(what + " hashes to " + scan.narHash.toNix32() +
                                 " (" + std::to_string(scan.narSize) +
                                 " bytes), not the claimed " +
                                 claimed.narHash.toNix32() + " (" +
                                 std::to_string(claimed.narSize) + " bytes)");
  if (ca) {
    Hash actual = recursive ? *scan.recursiveHash
                            : flatContentHash(storage, staged, *ca, limits);
    checkContentAddress(dir, claimed.path, scan.references, *ca, actual);
  }
  StagedVerdict v;
  std::tie(v.fileHash, v.fileSize) = fileHasher.finish();
  v.references = std::move(scan.references);
  return v;
}

NarInfo publishStaged(S3CacheStorage& s3, const StoreDir& dir,
                      const StagedOutput& staged, const StagedVerdict& verdict,
                      const SecretKey* signingKey) {
  NarInfo ni;
  ni.path = staged.claimed.path;
  ni.narHash = staged.claimed.narHash;
  ni.narSize = staged.claimed.narSize;
  ni.references = verdict.references;
  ni.deriver = staged.claimed.deriver;
  ni.ca = staged.claimed.ca;
  ni.compression = staged.compression;
  ni.fileHash = verdict.fileHash;
  ni.fileSize = verdict.fileSize;
  ni.url = "nar/" + verdict.fileHash.to(HashFormat::kNix32, false) + ".nar" +
           compressionExtension(staged.compression);
  if (!s3.exists(ni.url)) s3.copy(staged.key, ni.url);
  s3.remove(staged.key);
  if (signingKey)
    ni.sigs.insert(signingKey->sign(
        pathFingerprint(dir, ni.path, ni.narHash, ni.narSize, ni.references)));
  s3.put(narInfoFileName(ni.path), ni.render(dir));
  return ni;
}

}  // namespace kiln::store
