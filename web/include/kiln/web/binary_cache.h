#pragma once
/// The HTTP binary cache of the central store (design decision 8,
/// docs/web.md "Binary cache"): `/nix-cache-info`, `/<hashpart>.narinfo`
/// (signed with the farm's key), `/nar/<file hash>.nar[.xz|.zst]` and
/// `/log/<drv base name>`, in Nix 2.8's layout so the real `nix`
/// substitutes from it.
///
/// Each NAR is compressed once, on the first request of its narinfo, by
/// the store's `BinaryCacheWriter` into a `file://` cache directory under
/// the state directory (temporary file, fsync, rename: a half-written file
/// is never served); later requests read what is kept there. The narinfo
/// of a path is served only while the path is valid in the central store;
/// `prune` drops what garbage collection left behind.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>

#include "kiln/common/clock.h"
#include "kiln/store/signature.h"

namespace kiln {
class Source;
}

namespace kiln::store {
class CacheStorage;
class LocalStore;
struct NarInfo;
struct ValidPathInfo;
}  // namespace kiln::store

namespace kiln::web {

class Router;
struct WebContext;

/// How the cache serves the central store.
struct BinaryCacheConfig {
  /// The scheduler's state directory (central store: `store/`, `db/`;
  /// logs: `logs/`).
  std::string stateDir;
  /// The central store's logical store directory.
  std::string storeDir = "/nix/store";
  /// Where compressed NARs and their narinfos are kept; default
  /// `<stateDir>/binary-cache/<compression>`.
  std::string cacheDir;
  /// "zstd" (default: fastest to make and to unpack, see docs/web.md),
  /// "xz" or "none".
  std::string compression = "zstd";
  int compressionLevel = -1;  ///< the codec's default when < 0
  /// The farm's signing key; narinfos are served unsigned (beyond the
  /// signatures the store holds) when unset.
  std::optional<store::SecretKey> signingKey;
  int priority = 30;  ///< nix-cache-info's Priority (lower is preferred)
  /// How long a kept NAR that no narinfo names any more stays (so a client
  /// that fetched the narinfo just before the path was collected still
  /// gets it).
  std::chrono::seconds pruneGrace{std::chrono::hours(1)};
  /// How often a background thread prunes; zero: only when `prune` is
  /// called.
  std::chrono::seconds pruneInterval{0};
  /// The clock of pruning (file ages); null: RealClock.
  const Clock* clock = nullptr;
  /// The farm's cache on an object store (`--cache s3://…`), which the
  /// scheduler publishes to (scheduler/cache_publisher.h). When set, the
  /// narinfos and NAR files are read from it and passed through as they
  /// are (already signed); the central store, `cacheDir` and pruning are
  /// not used. Must be safe to call from several threads at once (the
  /// S3 storage is).
  std::shared_ptr<store::CacheStorage> remote;
};

/// What one `prune` removed.
struct PruneResult {
  size_t narInfos = 0;     ///< narinfos of paths no longer valid (or changed)
  size_t nars = 0;         ///< NAR files no narinfo names, older than the grace
  size_t temporaries = 0;  ///< unfinished uploads older than the grace
};

/// The compress-once cache of the central store's NARs. Thread-safe: the
/// web's handler threads call it at once; concurrent first requests of a
/// path compress it once. Throws FormatError for a malformed checked
/// value, SysError/Error when the store or the cache directory fails.
class BinaryCache {
 public:
  /// Checks the compression (FormatError) and starts the pruning thread
  /// when `pruneInterval` is set. Opens nothing yet: the central store may
  /// not exist until the scheduler makes it.
  explicit BinaryCache(BinaryCacheConfig config);
  /// Stops the pruning thread.
  ~BinaryCache();
  BinaryCache(const BinaryCache&) = delete;
  BinaryCache& operator=(const BinaryCache&) = delete;

  /// The text of `nix-cache-info`.
  std::string cacheInfo() const;
  /// The narinfo text of the valid path whose hash part is `hashPart`
  /// (checked: FormatError unless 32 nix32 characters), signed with the
  /// farm's key, after compressing its NAR if this is the first request;
  /// nullopt when no such path is valid.
  std::optional<std::string> narInfo(std::string_view hashPart);
  /// The kept file of `nar/<fileName>`; FormatError unless `fileName` is
  /// `<52 nix32 characters>.nar<this cache's extension>`. The file may be
  /// missing (never compressed, or pruned).
  std::string narFile(std::string_view fileName) const;
  /// With a remote cache: the NAR file `nar/<fileName>` read from it, or
  /// null when it lacks it; FormatError unless `fileName` is `<52 nix32
  /// characters>.nar[.xz|.zst|.bz2]`.
  std::unique_ptr<Source> openRemoteNar(std::string_view fileName) const;
  /// Whether narinfos and NARs come from a remote cache (config().remote).
  bool remote() const { return config_.remote != nullptr; }
  /// Removes narinfos of paths that are no longer valid (or were
  /// re-registered with other contents), then NAR files no narinfo names
  /// and unfinished uploads, once older than `pruneGrace`.
  PruneResult prune();
  /// How many NARs this object has compressed (a NAR served again is not
  /// counted again).
  uint64_t compressions() const { return compressions_; }
  const BinaryCacheConfig& config() const { return config_; }

 private:
  std::shared_ptr<store::LocalStore> store();
  store::NarInfo kept(const store::ValidPathInfo& info);
  std::optional<store::NarInfo> readKept(const store::ValidPathInfo& info);
  store::NarInfo compress(const store::ValidPathInfo& info);
  std::shared_ptr<std::mutex> pathLock(const std::string& hashPart);
  size_t pruneNarInfos(store::LocalStore& store);
  void pruneLoop();

  BinaryCacheConfig config_;
  const Clock& clock_;
  std::mutex storeMu_;
  std::shared_ptr<store::LocalStore> store_;  // opened on first use
  std::mutex locksMu_;
  std::map<std::string, std::weak_ptr<std::mutex>> pathLocks_;
  // Shared by requests, exclusive while pruning.
  std::shared_mutex pruneMu_;
  std::atomic<uint64_t> compressions_{0};
  std::mutex stopMu_;
  std::condition_variable stopCv_;
  bool stop_ = false;
  std::thread pruner_;
};

/// Registers the cache's routes on `router` when `ctx.binaryCache` is set:
/// GET/HEAD `/nix-cache-info`, `/{hash}.narinfo`, `/nar/{file*}`,
/// `/log/{drv*}`. Malformed names are a 400 naming what is wrong, unknown
/// paths a 404.
void addCacheRoutes(Router& router, WebContext& ctx);

}  // namespace kiln::web
