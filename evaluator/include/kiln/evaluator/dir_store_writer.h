#pragma once
/// A StoreWriter that writes store objects (`.drv` files, builtins.toFile
/// texts, source paths) as plain files under a root directory, the layout
/// of Nix's `--store 'local?root=DIR'`: `/nix/store/x.drv` lands at
/// `DIR/nix/store/x.drv`. No database is kept (references are not
/// recorded); existing objects are left alone.

#include <string>

#include "kiln/evaluator/store_writer.h"

namespace kiln::eval {

/// Writes each object once, atomically (temp name, rename), read-only.
class DirStoreWriter : public StoreWriter {
 public:
  /// `root` is created if missing; throws SysError if that fails.
  explicit DirStoreWriter(std::string root);
  /// Writes `contents` to `root + path` unless it exists; throws SysError.
  void addText(const std::string& path, const std::string& contents,
               const std::set<std::string>& references) override;
  /// As addText (the outputs are not recorded anywhere).
  void addDerivation(const std::string& path, const std::string& contents,
                     const std::set<std::string>& references,
                     const std::map<std::string, std::string>& outputs) override;
  /// Copies `fsPath` (filtered) to `root + path` unless it exists; throws
  /// Error if it cannot be read or written.
  void addSource(const std::string& path, const std::string& fsPath, const PathFilter& filter,
                 bool recursive) override;
  /// How many objects this writer created.
  size_t written() const { return written_; }

 private:
  std::string root_;
  size_t written_ = 0;
};

}  // namespace kiln::eval
