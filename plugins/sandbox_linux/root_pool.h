#pragma once
// Sandbox roots kept for reuse (docs/worker.md, "Sandboxes"). Creating a
// root's skeleton (/dev, /etc, /proc, the extra paths' mount points, ...)
// and removing it again after the build costs some thirty directory and
// file creations and removals a build, which a busy ext4 makes slow (its
// inode allocator searches past recently deleted inodes). A root whose
// builder could not change its skeleton (a build user that owns none of
// it: the worker runs as root) is emptied where the builder could write
// (/tmp and the store directory) and handed to the next build with the
// same layout instead.

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sandbox_fs.h"

namespace kiln::sandbox_linux {

/// Idle roots by layout key; thread-safe.
class RootPool {
 public:
  /// Keeps at most `maxIdle` idle roots per key.
  explicit RootPool(size_t maxIdle = 8) : maxIdle_(maxIdle) {}
  RootPool(const RootPool&) = delete;
  RootPool& operator=(const RootPool&) = delete;

  /// An idle root of layout `key`, or a new one in `scratchDir` (which
  /// the key must include). Throws plugin::Failure.
  std::unique_ptr<RootDir> take(const std::string& key,
                                const std::string& scratchDir);
  /// Empties `writable` (absolute paths on the host, below the root's
  /// path) and keeps `root` for the next take of `key`; a root that
  /// cannot be emptied, or one too many, is removed. Never throws.
  void give(const std::string& key, std::unique_ptr<RootDir> root,
            const std::vector<std::string>& writable);
  /// Idle roots held (all keys).
  size_t idle() const;

 private:
  size_t maxIdle_;
  mutable std::mutex mu_;
  std::map<std::string, std::vector<std::unique_ptr<RootDir>>> idle_;
};

}  // namespace kiln::sandbox_linux
