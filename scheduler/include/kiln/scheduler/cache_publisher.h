#pragma once
/// Publishing the farm's built outputs into its own binary cache, e.g. a
/// bucket of an object store (`kiln scheduler --cache s3://…`,
/// docs/operations.md "The farm's cache on an object store").
///
/// One background thread, so the scheduler's loop never waits on the
/// object store. What is still to publish is derived from the central
/// store, not held in memory: every valid path registered with a deriver
/// (a built output) whose registration row id is above a mark, kept in
/// `<stateDir>/cache-published` with the cache's URI. The thread walks
/// those paths in registration order, publishes each one's closure
/// (references first; compressed NAR first, signed narinfo last, see
/// store::BinaryCacheWriter::addPath) and moves the mark past it. A
/// scheduler that stops or crashes resumes where the mark stands; a path
/// the cache already has is skipped after one request. When the cache
/// fails (unreachable, refusing), the thread retries with exponential
/// backoff; the outputs wait in the store and the failure shows in
/// status(), the log and the `kiln_cache_*` metrics.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "kiln/common/clock.h"
#include "kiln/common/sync.h"
#include "kiln/store/binary_cache.h"

namespace prometheus {
class Registry;
}

namespace kiln::store {
class LocalStore;
}

namespace kiln::scheduler {

/// How a publisher runs.
struct CachePublisherConfig {
  /// The central store's state directory (`store/`, `db/`); the mark file
  /// `cache-published` is written there.
  std::string stateDir;
  std::string storeDir = "/nix/store";
  /// Compression (zstd by default here) and the farm's signing key.
  std::string compression = "zstd";
  std::optional<store::SecretKey> signingKey;
  /// How often the store is read for new outputs when nothing woke the
  /// thread (wake() is called for each registration).
  std::chrono::milliseconds poll{1000};
  /// The wait after a failure, doubled after each further one up to
  /// maxBackoff.
  std::chrono::milliseconds minBackoff{1000};
  std::chrono::milliseconds maxBackoff{60000};
  /// Outputs read from the store at once (memory stays bounded whatever
  /// waits).
  size_t batch = 64;
  /// Paths remembered as present in the cache (saving one request each);
  /// forgotten all at once past this many.
  size_t maxKnown = size_t{1} << 18;
};

/// What a publisher is doing.
struct CachePublisherStatus {
  std::string uri;              ///< the cache
  uint64_t waiting = 0;         ///< built outputs not yet published
  uint64_t publishedPaths = 0;  ///< paths this process uploaded
  uint64_t publishedBytes = 0;  ///< their NAR bytes (uncompressed)
  uint64_t failures = 0;        ///< failed attempts since the start
  std::string lastError;        ///< empty unless the last attempt failed
  int64_t failingSinceMs = 0;   ///< start of the current failures, or 0
};

/// The publisher thread. The service thread constructs it, wakes it and
/// reads its status; nothing else is shared.
class CachePublisher {
 public:
  /// Starts the thread, which publishes into `storage` (owned). Registers
  /// the `kiln_cache_*` families in `registry` when it is not null.
  CachePublisher(CachePublisherConfig config,
                 std::unique_ptr<store::CacheStorage> storage,
                 prometheus::Registry* registry,
                 const Clock& clock = RealClock::instance());
  /// Stops the thread after the path it is publishing (what is left
  /// waits for the next start).
  ~CachePublisher();
  CachePublisher(const CachePublisher&) = delete;
  CachePublisher& operator=(const CachePublisher&) = delete;

  /// Says that outputs were registered: the thread looks now instead of at
  /// its next poll (a failing cache still waits out its backoff).
  void wake();
  /// A copy of the current status.
  CachePublisherStatus status() const;

 private:
  struct Metrics;
  struct Shared {
    CachePublisherStatus status;
    bool woken = false;
    bool stop = false;
  };
  void run() noexcept;
  /// Publishes up to one batch; returns how many outputs it handled.
  size_t publishBatch();
  void succeeded();
  void failed(const std::string& error);
  /// Waits `d`, or less when stopping (or woken, with `wakeable`).
  void pause(std::chrono::milliseconds d, bool wakeable);
  bool stopping();
  void loadMark();
  void saveMark();

  CachePublisherConfig cfg_;
  std::unique_ptr<store::CacheStorage> storage_;
  const Clock& clock_;
  std::unique_ptr<Metrics> metrics_;
  std::string markFile_;
  int64_t mark_ = 0;  ///< publisher thread only
  /// The publisher thread's handle on the central store for its polls.
  std::unique_ptr<store::LocalStore> looker_;
  store::StorePathSet known_;  ///< publisher thread only
  Clock::TimePoint lastWarning_{};
  mutable Sync<Shared> shared_;
  std::thread thread_;
};

}  // namespace kiln::scheduler
