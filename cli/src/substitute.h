#pragma once
// `kiln build --substituters`: fetching outputs from binary caches (kiln's
// HTTP cache, nix-serve, file://) before building, so only what no cache
// has is built.

#include <string>
#include <vector>

#include "kiln/store/binary_cache.h"
#include "kiln/store/local_store.h"

namespace kiln::cli {

/// Where and how to substitute from.
struct SubstituteOptions {
  std::vector<std::string> urls;  ///< caches, tried in order
  store::CacheTrust trust;        ///< keys whose signatures are accepted
};

/// Fetches from the caches the outputs of the derivations `drvs` (valid in
/// `store`) and, for a derivation whose outputs no cache has whole, of its
/// input derivations, recursively; each copied closure is verified
/// (signatures, NAR hashes) and registered with its derivation's outputs.
/// A cache that fails (unreachable, untrusted or corrupt data) is reported
/// on stderr and skipped: the farm builds what it lacks. Returns how many
/// paths were copied. Throws Error for a `.drv` that cannot be read.
size_t substituteOutputs(store::LocalStore& store,
                         const std::vector<store::StorePath>& drvs,
                         const SubstituteOptions& options);

}  // namespace kiln::cli
