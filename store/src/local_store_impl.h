#pragma once
// LocalStore's private state, shared by local_store*.cc.

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "kiln/common/file_lock.h"
#include "kiln/common/sqlite.h"
#include "kiln/common/sync.h"
#include "kiln/store/local_store.h"

namespace kiln::store {

struct LocalStore::Impl {
  Impl(const std::string& stateDir, const StoreDir& storeDir);

  StoreDir storeDir;
  std::string stateDir;      // absolute
  std::string physicalRoot;  // <state>/store
  std::string gcRootsDir;    // <state>/gcroots
  std::string tempRootsDir;  // <state>/temproots
  std::string locksDir;      // <state>/locks
  std::string gcLockPath;    // <state>/gc.lock

  Sync<std::unique_ptr<SqliteDb>> db;

  // This object's temporary roots file (created on first use, removed on
  // destruction) and the roots already written to it.
  struct TempRoots {
    std::optional<FileLock> file;
    std::set<std::string> written;
  };
  Sync<TempRoots> tempRoots;
  unsigned tempCounter = 0;
  std::mutex tempCounterMutex;

  /// Row id of `path` in ValidPaths, if valid.
  std::optional<int64_t> pathId(SqliteDb& db, const StorePath& path);
  /// Reads one ValidPaths row (with references) or nullopt.
  std::optional<ValidPathInfo> readInfo(SqliteDb& db, const StorePath& path);
  /// Inserts `info` and its references in one transaction; references
  /// other than the path itself must already be valid.
  void registerValidPath(const ValidPathInfo& info);
  /// Removes the registration of `path` (must have no other referrers).
  void invalidatePath(SqliteDb& db, const StorePath& path);

  /// Exclusive lock serialising adders of `path`.
  FileLock lockPath(const StorePath& path);
  /// A fresh temporary name under the physical root for adding `path`.
  std::string tempPathFor(const StorePath& path);
  /// The store path a temporary name belongs to, if it is one.
  std::optional<StorePath> pathOfTemp(const std::string& name);
};

/// Makes a freshly written tree canonical and durable: files 0444 (0555 if
/// owner-executable), directories 0555, mtime 1, everything fsynced.
void canonicaliseTree(const std::string& path);
/// Sum of the sizes of the regular files and symlinks in a tree.
uint64_t treeSize(const std::string& path);
/// fsyncs a directory.
void syncDirectory(const std::string& dir);

}  // namespace kiln::store
