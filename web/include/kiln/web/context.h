#pragma once
/// What page modules read and write through (docs/architecture.md, "web"):
/// each module registers its routes with `void addXxxRoutes(Router&,
/// WebContext&)` (routes.h lists them). Reads go through a read-only
/// `StateView` per handler thread and the scheduler's published snapshot;
/// mutations through the scheduler's request path (the one the CLI uses),
/// so a page never blocks the scheduler's thread.

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

namespace prometheus {
class Collectable;
class Registry;
}  // namespace prometheus
#include <optional>
#include <string>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/scheduler/offline_requests.h"
#include "kiln/scheduler/snapshot.h"
#include "kiln/scheduler/state_view.h"
#include "kiln/scheduler/tokens.h"

namespace kiln::web {

class BinaryCache;
class PushReplayGuard;

/// Shared by every handler; filled before the server starts, then only
/// read (its functions must be safe to call from several threads).
struct WebContext {
  /// The scheduler's state directory (`scheduler.sqlite`, `store/`,
  /// `logs/`, ...).
  std::string stateDir;
  /// The state database when it is PostgreSQL (`--database`; the
  /// password from databasePasswordFile or PGPASSFILE); empty: the SQLite
  /// file under stateDir.
  std::string databaseUrl;
  std::string databasePasswordFile;
  /// The state database these name.
  scheduler::DatabaseSpec database() const {
    return scheduler::DatabaseSpec::inStateDir(stateDir, databaseUrl,
                                               databasePasswordFile);
  }
  /// The logical store directory of the central store.
  std::string storeDir = "/nix/store";
  /// The running scheduler's newest snapshot; null function or null result
  /// when there is none (the web runs without a scheduler).
  std::function<std::shared_ptr<const scheduler::SchedulerSnapshot>()> snapshot;
  /// Applies an operator request (kind, arguments) and returns its answer;
  /// throws SchedulerStateError for the caller's mistakes, Error otherwise.
  /// Default (when null): scheduler::submitRequest on `stateDir`.
  std::function<nlohmann::json(const std::string&, const nlohmann::json&)>
      submit;
  /// What the default `submit` asks about a jobset's new evaluator when it
  /// applies a request itself (no scheduler holds the state directory's
  /// lock): the CLI passes the process's evaluator plugins
  /// (scheduler::loadedEvaluatorCheck). Null: any well-formed name.
  scheduler::EvaluatorCheck checkEvaluator;
  /// Queues a request without waiting for it (the scheduler applies it
  /// when it runs, e.g. an evaluation); returns the request's id. Throws
  /// Error. Default (when null): scheduler::queueRequest on `stateDir`.
  std::function<int64_t(const std::string&, const nlohmann::json&)> enqueue;
  /// The scope of a bearer token, or nullopt when it is unknown or
  /// revoked. Default (when null): the state database's tokens, read
  /// through view().
  std::function<std::optional<scheduler::TokenScope>(const std::string&)>
      tokenScope;
  /// Whether reads (every GET) need a read-scope token too.
  bool privateReads = false;
  /// The key of the push webhook's HMAC-SHA256 signatures (one for every
  /// jobset); empty: the webhook refuses every push.
  std::string pushSecret;
  /// Remembers the pushes already accepted, so that none is accepted
  /// twice; shared by the copies of this context. Made when the push
  /// route is added, if null.
  std::shared_ptr<PushReplayGuard> pushReplay;
  /// The wall clock pushes' timestamps are checked against; null: the
  /// real one.
  const Clock* clock = nullptr;

  /// The registry served on `/metrics` (the scheduler's, which the web
  /// adds its own families to); null: no metrics.
  std::shared_ptr<prometheus::Registry> metrics;
  /// Further collectables served on `/metrics` (e.g. notifiers').
  std::vector<std::shared_ptr<prometheus::Collectable>> extraMetrics;
  /// The central store's HTTP binary cache (binary_cache.h); null: the
  /// cache's routes are not served.
  std::shared_ptr<BinaryCache> binaryCache;

  /// This thread's read-only view of the state database, opened on first
  /// use and kept for the thread's life; nullptr while the scheduler has
  /// not created the database. Throws SqliteError/SchemaError otherwise.
  scheduler::StateView* view() const;
  /// `submit`, or submitRequest when it is null.
  nlohmann::json apply(const std::string& kind,
                       const nlohmann::json& args) const;
  /// `enqueue`, or queueRequest when it is null.
  int64_t queue(const std::string& kind, const nlohmann::json& args) const;
  /// `tokenScope`, or the state database's answer when it is null
  /// (nullopt while there is no database).
  std::optional<scheduler::TokenScope> scopeOf(const std::string& token) const;

  /// Identifies this context in the per-thread view cache.
  uint64_t serial = nextSerial();
  static uint64_t nextSerial();
};

}  // namespace kiln::web
