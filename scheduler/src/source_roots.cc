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

SourceRootsSync syncEvalSourceRoots(StateDb& db, store::LocalStore& store,
                                    int64_t keep) {
  int64_t newest = newestEvaluation(db);
  auto referenced = referencedEvalSources(db, keep);
  SourceRootsSync out;
  std::set<int64_t> rooted;
  for (auto& [link, path] : store.findRoots()) {
    auto eval = evalOfRoot(link);
    if (!eval) continue;
    if (referenced.count(*eval) || *eval > newest) {
      rooted.insert(*eval);
      continue;
    }
    if (store.removeRoot(evalSourcesRoot(*eval))) ++out.removed;
  }
  for (auto& [eval, path] : referenced) {
    if (rooted.count(eval)) {
      ++out.kept;
      continue;
    }
    try {
      auto p = store.parsePath(path);
      if (!store.isValid(p)) continue;  // collected before this kiln rooted it
      rootEvalSources(store, eval, path);
      ++out.added;
      ++out.kept;
    } catch (const Error& e) {
      logWarn("the sources of evaluation " + std::to_string(eval) + " (" +
              path + ") cannot be rooted: " + e.what());
    }
  }
  return out;
}

}  // namespace kiln::scheduler
