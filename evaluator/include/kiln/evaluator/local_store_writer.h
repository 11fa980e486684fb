#pragma once
/// A StoreWriter that adds what an evaluation produces to kiln's LocalStore,
/// registered as nix-instantiate registers it: a `.drv` refers to its input
/// derivations and input sources and has its output paths recorded
/// (DerivationOutputs), a toFile text refers to the paths in its context,
/// sources are `source` paths (recursive) or flat fixed-output files.
/// Everything written stays protected by this process's temporary roots
/// while the LocalStore object lives. Adds are queued in a
/// LocalStore::Batch and committed (made durable, then registered) when
/// `batchSize` objects are queued and on flush(); a queued object is not
/// valid yet.

#include <functional>
#include <string>
#include <thread>

#include "kiln/evaluator/store_writer.h"
#include "kiln/store/local_store.h"

namespace kiln::eval {

/// Writes into a LocalStore it borrows (which must outlive it). What is
/// still queued when it is destroyed is discarded (never registered).
class LocalStoreWriter : public StoreWriter {
 public:
  /// Objects queued before a commit, by default.
  static constexpr size_t kDefaultBatchSize = 4096;
  /// `store`'s logical store directory must be the evaluation's.
  /// `onCommit` (may be empty) runs after every commit that registered
  /// something, e.g. to release output that names the committed paths.
  explicit LocalStoreWriter(store::LocalStore& store, size_t batchSize = kDefaultBatchSize,
                            std::function<void()> onCommit = {});
  /// Adds a text object; throws Error if a reference is not valid or the
  /// path the store computes differs from `path`.
  void addText(const std::string& path, const std::string& contents,
               const std::set<std::string>& references) override;
  /// Adds a `.drv` (as addText) and records its output paths.
  void addDerivation(const std::string& path, const std::string& contents,
                     const std::set<std::string>& references,
                     const std::map<std::string, std::string>& outputs) override;
  /// Adds a source path unless it is valid already; throws Error if the
  /// file or tree no longer hashes to `path` (it changed meanwhile).
  void addSource(const std::string& path, const std::string& fsPath, const PathFilter& filter,
                 bool recursive) override;
  /// The store skips its output check of `.drv`s `hashes` made.
  void useDerivationHashes(const store::DrvHashCache* hashes) override {
    batch_.trustHashes(hashes);
  }
  /// Commits the queued objects (durable and valid when it returns).
  void flush() override;
  /// How many objects are queued (added, not yet committed).
  size_t queued() const { return batch_.size(); }
  /// How many objects this writer added (not counting ones already valid).
  size_t written() const { return written_; }

 private:
  store::StorePath checkedAddText(const std::string& path, const std::string& contents,
                                  const std::set<std::string>& references);
  void expectPath(const store::StorePath& got, const std::string& expected,
                  const std::string& what) const;
  /// Commits when the batch is full.
  void commitIfFull();

  store::LocalStore& store_;
  store::LocalStore::Batch batch_;
  size_t batchSize_;
  std::function<void()> onCommit_;
  size_t written_ = 0;
};

}  // namespace kiln::eval
