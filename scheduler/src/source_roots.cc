// GC roots of evaluations' kept sources (source_roots.h).
#include "kiln/scheduler/source_roots.h"

#include <charconv>
#include <optional>
#include <set>
#include <string_view>

#include "kiln/common/logging.h"
#include "kiln/scheduler/cache_roots.h"

namespace kiln::scheduler {

namespace {

constexpr std::string_view kRootDir = "kiln-sources";

// The evaluation id a root link under kiln-sources names; nullopt for
// another link.
std::optional<int64_t> evalOfRoot(const std::string& link) {
  std::string marker = "/gcroots/" + std::string(kRootDir) + "/";
  auto at = link.rfind(marker);
  if (at == std::string::npos) return std::nullopt;
  std::string_view id(link);
  id.remove_prefix(at + marker.size());
  int64_t eval = 0;
  auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), eval);
  if (ec != std::errc() || end != id.data() + id.size() || eval < 1)
    return std::nullopt;
  return eval;
}

int64_t newestEvaluation(StateDb& db) {
  auto s = db.db().prepare("SELECT MAX(id) FROM evaluations");
  return s.step() && !s.isNull(0) ? s.getInt(0) : 0;
}

}  // namespace

std::string evalSourcesRoot(int64_t eval) {
  return std::string(kRootDir) + "/" + std::to_string(eval);
}

void rootEvalSources(store::LocalStore& store, int64_t eval,
                     const std::string& path) {
  try {
    // A handle of its own: its temporary root on the path (addRoot's)
    // ends here instead of lasting as long as `store`.
    store::LocalStore own(store.stateDir(), store.storeDir());
    own.addRoot(evalSourcesRoot(eval), own.parsePath(path));
  } catch (const std::exception& e) {
    logWarn("rooting the sources of evaluation " + std::to_string(eval) +
            " failed: " + e.what());
  }
}

SourceRootsSync SourceRootsPlan::counts() const {
  return {rooted + add.size(), add.size(), drop.size()};
}

store::GcRootChanges SourceRootsPlan::gcChanges(
    store::LocalStore& store) const {
  store::GcRootChanges out;
  for (auto& [eval, link] : drop) out.droppedLinks.insert(link);
  for (auto& [eval, path] : add) out.addedRoots.insert(store.parsePath(path));
  return out;
}

SourceRootsPlan planEvalSourceRoots(StateDb& db, store::LocalStore& store,
                                    int64_t keep) {
  int64_t newest = newestEvaluation(db);
  auto referenced = referencedEvalSources(db, keep);
  SourceRootsPlan plan;
  std::set<int64_t> rooted;
  for (auto& [link, path] : store.findRoots()) {
    auto eval = evalOfRoot(link);
    if (!eval) continue;
    if (referenced.count(*eval) || *eval > newest)
      rooted.insert(*eval);
    else
      plan.drop.emplace(*eval, link);
  }
  for (auto& [eval, path] : referenced) {
    if (rooted.count(eval)) {
      ++plan.rooted;
      continue;
    }
    try {
      // Not valid: collected before this kiln rooted it.
      if (store.isValid(store.parsePath(path))) plan.add.emplace(eval, path);
    } catch (const Error& e) {
      logWarn("the sources of evaluation " + std::to_string(eval) + " (" +
              path + ") cannot be rooted: " + e.what());
    }
  }
  return plan;
}

SourceRootsSync syncEvalSourceRoots(StateDb& db, store::LocalStore& store,
                                    int64_t keep) {
  auto plan = planEvalSourceRoots(db, store, keep);
  auto out = plan.counts();
  out.removed = 0;
  for (auto& [eval, link] : plan.drop)
    if (store.removeRoot(evalSourcesRoot(eval))) ++out.removed;
  for (auto& [eval, path] : plan.add) rootEvalSources(store, eval, path);
  return out;
}

}  // namespace kiln::scheduler
