#pragma once
/// StoreWriter: where an evaluation's store objects (derivations, toFile
/// texts, source paths) go. Implemented outside the evaluator too
/// (LocalStoreWriter, DirStoreWriter, the CLI's writers) and handed to an
/// EvalState with EvalState::setStoreWriter.

#include <functional>
#include <map>
#include <set>
#include <string>

namespace kiln::store {
class DrvHashCache;
}  // namespace kiln::store

namespace kiln::eval {

/// Decides whether an entry below a source tree is copied (filterSource,
/// builtins.path's `filter`): its full path and type ("regular",
/// "directory", "symlink" or "unknown"). Empty: everything is copied.
using PathFilter = std::function<bool(const std::string& path, const char* type)>;

/// Adapts `filter` to the NAR writer's path-only filter (store::NarPathFilter)
/// by lstat-ing each entry for its type; empty stays empty.
std::function<bool(const std::string&)> narFilterOf(const PathFilter& filter);

/// Receives the store objects an evaluation produces: derivations, toFile
/// texts and source paths. Paths are full logical paths, already computed
/// by the evaluator; an implementation writes them somewhere (a plain
/// directory, kiln's LocalStore) and throws Error when it cannot, or when
/// what it would write gets a different path (the source changed).
/// Without a writer (EvalState::storeWriter() null) nothing is written.
class StoreWriter {
 public:
  virtual ~StoreWriter() = default;
  /// Adds a `text` object (builtins.toFile) referring to `references`.
  virtual void addText(const std::string& path, const std::string& contents,
                       const std::set<std::string>& references) = 0;
  /// Adds a derivation: its ATerm `contents`, `references` (input .drv files
  /// and input sources) and `outputs` (output name → path, for outputs whose
  /// path is known).
  virtual void addDerivation(const std::string& path, const std::string& contents,
                             const std::set<std::string>& references,
                             const std::map<std::string, std::string>& outputs) = 0;
  /// Copies the file or tree `fsPath` as `path`: recursively (NAR, only
  /// entries `filter` accepts) or, if not `recursive`, a single regular
  /// file addressed by the sha256 of its contents.
  virtual void addSource(const std::string& path, const std::string& fsPath,
                         const PathFilter& filter, bool recursive) = 0;
  /// Tells the writer where the evaluator memoises the hashes of the
  /// derivations it made (their outputs computed by it:
  /// DrvHashCache::outputsChecked), so a store that checks each `.drv`'s
  /// outputs need not recompute them. `hashes` outlives the evaluation's
  /// adds; nullptr forgets it. Default: ignored.
  virtual void useDerivationHashes(const store::DrvHashCache* hashes) { (void)hashes; }
  /// Makes everything added so far durable and present at its path (a
  /// writer may queue adds and write them in batches). The evaluator calls
  /// it before it reads a path inside the store directory; the caller at
  /// the end of the evaluation. Throws Error when writing fails.
  virtual void flush() {}
};

}  // namespace kiln::eval
