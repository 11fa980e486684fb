#pragma once
/// GC roots of evaluations' kept sources in the central store
/// (docs/operations.md, "Garbage collection"): the scheduler roots each
/// evaluation's `source` path as it records it, at
/// `<state>/gcroots/kiln-sources/<evaluation id>`, so `kiln store gc`
/// keeps it; a collection given the retention (`--keep-evaluations`)
/// first drops the roots of evaluations no longer referenced
/// (referencedEvalSources: the latest evaluations and each channel's), so
/// their sources are collected, and restores missing roots of those that
/// are.

#include <cstdint>
#include <map>
#include <string>

#include "kiln/scheduler/state_db.h"
#include "kiln/store/local_store.h"

namespace kiln::scheduler {

/// The root name (LocalStore::addRoot) of evaluation `eval`'s sources.
std::string evalSourcesRoot(int64_t eval);

/// Roots `path`, evaluation `eval`'s sources, in the store of `store`
/// (through a handle of its own, so that no temporary root of `store`
/// outlives the call). Never throws: a
/// failure is logged (the sources stay until a collection without a
/// root, or until the next syncEvalSourceRoots restores it).
void rootEvalSources(store::LocalStore& store, int64_t eval,
                     const std::string& path);

/// What syncEvalSourceRoots changed (or, planned, would change).
struct SourceRootsSync {
  size_t kept = 0;     ///< referenced evaluations whose sources are rooted
  size_t added = 0;    ///< roots restored
  size_t removed = 0;  ///< roots of evaluations no longer referenced
};

/// The root changes syncEvalSourceRoots makes, computed without making
/// them (planEvalSourceRoots).
struct SourceRootsPlan {
  /// Referenced evaluations already rooted.
  size_t rooted = 0;
  /// Roots to drop: evaluation → its root link (findRoots' key).
  std::map<int64_t, std::string> drop;
  /// Roots to add: evaluation → its valid sources path.
  std::map<int64_t, std::string> add;

  /// The counts syncEvalSourceRoots reports when it makes these changes.
  SourceRootsSync counts() const;
  /// The changes as LocalStore::previewGarbage takes them, so a dry run
  /// reports what a collection after the sync deletes.
  store::GcRootChanges gcChanges(store::LocalStore& store) const;
};

/// What syncEvalSourceRoots(db, store, keep) would change, with nothing
/// changed: drops the roots of evaluations the database holds and does
/// not reference (referencedEvalSources(db, keep)); adds those of
/// referenced ones whose valid sources are not rooted.
SourceRootsPlan planEvalSourceRoots(StateDb& db, store::LocalStore& store,
                                    int64_t keep);

/// Makes the `kiln-sources` roots of `store` those of
/// referencedEvalSources(db, keep): drops the others (only of evaluations
/// the database already holds, so a root added by a scheduler meanwhile
/// stays) and adds the missing ones whose path is valid.
SourceRootsSync syncEvalSourceRoots(StateDb& db, store::LocalStore& store,
                                    int64_t keep);

}  // namespace kiln::scheduler
