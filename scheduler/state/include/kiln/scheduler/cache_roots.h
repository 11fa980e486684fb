#pragma once
/// The roots of the binary cache's garbage collection (`kiln cache gc`,
/// docs/operations.md): the outputs of each jobset's latest evaluations,
/// and named pins (table `cache_pins`, schema migration 14), each of which
/// protects a store path's whole closure. Paths are full store paths as
/// the state database holds them; the store layer parses them. The same
/// retention decides which evaluations' kept sources the central store's
/// collection keeps (source_roots.h).

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace kiln::scheduler {

class StateDb;

/// A named pin.
struct CachePin {
  std::string name;
  std::string path;  ///< a full store path
  int64_t createdMs = 0;
};

/// The `cache_pins` table of a borrowed state database. Throws SqlError;
/// SchedulerStateError for a name or path out of bounds.
class CachePinStore {
 public:
  /// Works on `db`, which must outlive this object.
  explicit CachePinStore(StateDb& db);
  /// Pins `path` as `name` (replacing the path of an existing pin of that
  /// name). Names are 1–200 bytes of [A-Za-z0-9._+-]; paths at most 4096
  /// bytes, absolute.
  void add(const std::string& name, const std::string& path, int64_t nowMs);
  /// Removes pin `name`; false if there was none.
  bool remove(const std::string& name);
  /// Every pin, by name (at most 100,000).
  std::vector<CachePin> list();

 private:
  StateDb& db_;
};

/// The output paths of the builds of each jobset's latest evaluations:
/// walking its evaluations newest first, every one up to and including
/// the `keep`-th whose builds have all finished (so an evaluation still
/// building never displaces a finished one). `keep` ≥ 1.
std::set<std::string> latestEvaluationOutputs(StateDb& db, int64_t keep);

/// The evaluations latestEvaluationOutputs takes the outputs of, by id.
std::set<int64_t> latestEvaluations(StateDb& db, int64_t keep);

/// The evaluations whose kept sources (table `eval_sources`) are still
/// referenced, evaluation id → store path: those of latestEvaluations and
/// each jobset's channel's evaluation (a channel's nixexprs.tar.xz).
std::map<int64_t, std::string> referencedEvalSources(StateDb& db, int64_t keep);

}  // namespace kiln::scheduler
