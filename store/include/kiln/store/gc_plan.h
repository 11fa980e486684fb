#pragma once
/// The pure part of garbage collection: given the reference graph of all
/// valid paths and the live roots, which paths are dead and in which order
/// they can be deleted (every referrer before its references). No I/O, so
/// it is tested on its own.

#include <map>
#include <vector>

#include "kiln/store/store_path.h"

namespace kiln::store {

/// Valid path → its references (self-references allowed).
using ReferenceGraph = std::map<StorePath, StorePathSet>;

/// Everything reachable from `roots` through `graph`; roots absent from the
/// graph (not valid) are ignored.
StorePathSet reachableFrom(const ReferenceGraph& graph,
                           const StorePathSet& roots);

/// The dead paths (in `graph` but not reachable from `roots`), ordered so
/// that each path comes after every dead path that refers to it. A dead
/// path is never referenced by a live one (a referrer keeps its references
/// alive), so deleting in this order never breaks a reference.
std::vector<StorePath> planGarbage(const ReferenceGraph& graph,
                                   const StorePathSet& roots);

}  // namespace kiln::store
