#pragma once
/// Closure-aware garbage collection of a binary cache (docs/operations.md,
/// "Garbage collection of the farm's binary cache"). The live set is the
/// closure of the roots through the References of the cache's own
/// narinfos; every other narinfo (and its `.ls` listing) is deleted,
/// referrers before their references, so a kept narinfo never names a
/// deleted one. A NAR file no remaining narinfo names is deleted only once
/// it has stayed unnamed for the grace period (a client that has just
/// fetched a narinfo still gets its NAR; a NAR uploaded before its narinfo
/// is not taken): the first run that sees it unnamed records it in the
/// cache's `kiln-gc/pending-nars`, a later run past the grace deletes it.
/// A narinfo that does not parse is reported and kept, with whatever
/// References and URL lines it has. The planning (planCacheGc) is pure;
/// collectCacheGarbage reads the cache and applies the plan.

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kiln/store/binary_cache.h"
#include "kiln/store/store_path.h"

namespace kiln::store {

/// The cache file that remembers since when each NAR has been unnamed:
/// lines `<unix seconds> <key>`.
inline constexpr const char* kPendingNarsKey = "kiln-gc/pending-nars";

/// What a collection sees of a cache.
struct CacheSnapshot {
  std::string storeDir = "/nix/store";  ///< from `nix-cache-info`
  /// Parsed narinfos by store path, with the narinfo file's size.
  std::map<StorePath, std::pair<NarInfo, uint64_t>> narinfos;
  /// Narinfo files that do not parse: key → the reason.
  std::map<std::string, std::string> malformed;
  /// What the malformed narinfos still name, read leniently: their
  /// References (kept alive) and URL (not deleted).
  StorePathSet malformedReferences;
  std::set<std::string> malformedUrls;
  std::map<std::string, uint64_t> nars;      ///< `nar/…` key → size
  std::map<std::string, uint64_t> listings;  ///< `<hash>.ls` key → size
  /// NAR key → the Unix second it was first seen unnamed.
  std::map<std::string, int64_t> pendingSince;
};

/// One file to delete.
struct CacheGcItem {
  std::string key;
  uint64_t size = 0;
  std::string path;  ///< the store path, for narinfos and listings
};

/// What a collection does (or, dry, would do).
struct CacheGcPlan {
  /// Narinfos (each followed by its listing, if any), referrers first.
  std::vector<CacheGcItem> narinfos;
  std::vector<CacheGcItem> nars;  ///< unnamed past the grace period
  /// Unnamed NARs still within the grace period (kept this time).
  std::vector<CacheGcItem> narsWaiting;
  StorePathSet missingRoots;  ///< roots with no narinfo in the cache
  size_t keptNarinfos = 0;
  size_t keptNars = 0;
  /// The new `kiln-gc/pending-nars`: NAR key → since.
  std::map<std::string, int64_t> pendingSince;
};

/// Plans a collection of `cache` keeping the closure of `roots`, at Unix
/// second `nowSec`, deleting NARs unnamed for at least `grace`.
CacheGcPlan planCacheGc(const CacheSnapshot& cache, const StorePathSet& roots,
                        int64_t nowSec, std::chrono::seconds grace);

/// Bounds of reading a cache.
struct CacheGcLimits {
  size_t maxObjects = 10'000'000;  ///< files listed
};

/// Lists and reads `storage` (narinfos parsed against the store
/// directory its `nix-cache-info` names). Throws Error naming the cache if
/// it cannot be listed or read, or has no `nix-cache-info` (not a cache).
CacheSnapshot readCacheSnapshot(CacheStorage& storage,
                                const CacheGcLimits& limits = {});

/// Applies `plan` to `storage`: narinfos in order, the pending file, then
/// NARs. Throws Error (what was deleted before stays deleted; the next run
/// resumes).
void applyCacheGc(CacheStorage& storage, const CacheGcPlan& plan);

}  // namespace kiln::store
