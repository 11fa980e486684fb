#pragma once
/// A StoreWriter that writes text objects (`.drv` files, builtins.toFile)
/// as plain files under a root directory, the layout of Nix's
/// `--store 'local?root=DIR'`: `/nix/store/x.drv` lands at
/// `DIR/nix/store/x.drv`. No database is kept; existing files are left alone.

#include <string>

#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {

/// Writes each text object once, atomically (temp name, rename), read-only.
class DirStoreWriter : public StoreWriter {
 public:
  /// `root` is created if missing; throws SysError if that fails.
  explicit DirStoreWriter(std::string root);
  /// Writes `contents` to `root + path` unless it exists; throws SysError.
  void addText(const std::string& path, const std::string& contents) override;
  /// How many objects this writer created.
  size_t written() const { return written_; }

 private:
  std::string root_;
  size_t written_ = 0;
};

}  // namespace kiln::eval
