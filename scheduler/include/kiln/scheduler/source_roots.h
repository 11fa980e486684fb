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

/// What syncEvalSourceRoots changed.
struct SourceRootsSync {
  size_t kept = 0;     ///< referenced evaluations whose sources are rooted
  size_t added = 0;    ///< roots restored
  size_t removed = 0;  ///< roots of evaluations no longer referenced
};

/// Makes the `kiln-sources` roots of `store` those of
/// referencedEvalSources(db, keep): drops the others (only of evaluations
/// the database already holds, so a root added by a scheduler meanwhile
/// stays) and adds the missing ones whose path is valid.
SourceRootsSync syncEvalSourceRoots(StateDb& db, store::LocalStore& store,
                                    int64_t keep);

}  // namespace kiln::scheduler
