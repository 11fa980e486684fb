#pragma once
/// Aggregate jobs whose `constituents` name other jobs by attribute
/// (strings, no string context), or list derivations the aggregate's own
/// derivation does not use (`drv // { constituents = ...; }`): their
/// derivation does not depend on those jobs, so `kiln eval --constituents`
/// rewrites it into one that does, as nix-eval-jobs does for named ones:
/// each missing constituent's `.drv` becomes an input derivation (all its
/// outputs), the output paths are computed again and the new `.drv` is
/// written into the store. The scheduler then builds the aggregate after
/// its constituents, and fails it when one of them failed. An aggregate
/// that depends on all its constituents already (releaseTools.aggregate
/// with derivations) keeps its derivation.

#include <map>
#include <string>
#include <vector>

#include "kiln/store/derivation.h"

namespace kiln::eval {
class StoreWriter;
}  // namespace kiln::eval

namespace kiln::cli {

/// The rewritten aggregate: its new `.drv` path and outputs (name → path).
struct RewrittenDrv {
  std::string drvPath;
  std::map<std::string, std::string> outputs;
};

/// Rewrites aggregate derivations. `loader` reads `.drv` files (those of
/// the aggregates, the constituents and their inputs, which must be
/// valid); `writer` (not owned, must outlive this object) receives the new
/// `.drv` files. Not thread-safe.
class AggregateRewriter {
 public:
  AggregateRewriter(const store::StoreDir& storeDir, store::DrvLoader loader,
                    eval::StoreWriter& writer);

  /// The derivation at `drvPath` (full path) with every `.drv` of
  /// `constituents` (full paths) it lacks added to its input derivations;
  /// written through the writer (flushed: valid once this returns). When it
  /// lacks none, `drvPath` and its outputs unchanged. Throws
  /// FormatError for a path outside the store, a `.drv` that is not
  /// input-addressed (fixed or floating output), and what the loader and
  /// the writer throw.
  RewrittenDrv rewrite(const std::string& drvPath,
                       const std::vector<std::string>& constituents);

 private:
  store::StoreDir storeDir_;
  store::DrvLoader loader_;
  store::DrvHashCache hashes_;
  eval::StoreWriter& writer_;
};

}  // namespace kiln::cli
