#pragma once
/// Copying closures between the local store and a binary cache: what
/// `kiln store copy-to-cache` and `copy-from-cache` do.

#include <cstdint>
#include <vector>

#include "kiln/store/binary_cache.h"
#include "kiln/store/local_store.h"

namespace kiln::store {

/// A path the cache does not have.
class CachePathNotFound : public Error {
 public:
  using Error::Error;
};

/// What a copy did.
struct CopyResult {
  std::vector<StorePath> copied;  ///< in copy order (references first)
  size_t alreadyPresent = 0;      ///< paths skipped because the target had them
};

/// Publishes the closure of `paths` (valid in `store`) through `writer`,
/// references before referrers so the cache never holds a narinfo whose
/// references are missing. Paths the cache already has are skipped. Each
/// NAR is re-hashed while it is written and must match the store's
/// metadata. Throws InvalidPathError for a path `store` lacks.
CopyResult copyClosureToCache(LocalStore& store, BinaryCacheWriter& writer,
                              const StorePathSet& paths);

/// The same for a long-running publisher that already called
/// writer.init(): paths in `known` (the cache has them) are skipped without
/// asking the cache, and every path found there or published is added to
/// `known`. The closure is walked from `paths` and not past a path the
/// cache has (its narinfo means its closure is there: writers publish
/// references first), so the cost is what is new. Each path read gets a
/// temporary root in `store` first (a collector leaves it alone).
CopyResult copyClosureToCache(LocalStore& store, BinaryCacheWriter& writer,
                              const StorePathSet& paths, StorePathSet& known);

/// How an import checks what it reads.
struct ImportOptions {
  CacheTrust trust;
};

/// Imports the closure of `paths` from the cache into `store`. Every
/// narinfo of the closure is fetched, validated and checked for trust
/// before anything is added; then paths are added references first in one
/// LocalStore::Batch, each NAR read once and verified on the bytes that
/// are written (NarHash/NarSize, see BinaryCacheReader::narSource; the CA
/// field's content hash; a `.drv`'s outputs), so a corrupt, truncated or
/// changing NAR leaves the store unchanged. Paths already valid are
/// skipped. Throws
/// CachePathNotFound if the cache lacks a path, FormatError for corrupt
/// data, Error for untrusted paths.
CopyResult copyClosureFromCache(BinaryCacheReader& reader, LocalStore& store,
                                const StorePathSet& paths,
                                const ImportOptions& options);

}  // namespace kiln::store
