#pragma once
// LocalStore's private state, shared by local_store*.cc.

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "kiln/common/clock.h"
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
  ContentSync contentSync = ContentSync::kDurable;
  const Clock* clock = &RealClock::instance();  // registration times

  Sync<std::unique_ptr<SqliteDb>> db;
  // Prepared statements of `db` by SQL text (used under db's lock;
  // declared after it, so finalized before the connection closes).
  std::unordered_map<std::string, std::unique_ptr<SqliteStmt>> statements;

  // This object's temporary roots file (created on first use, removed on
  // destruction), the roots already written to it (base name → whether the
  // path was seen valid since: a collector keeps it valid from then on),
  // and gc.lock, opened once and locked shared around each write.
  struct TempRoots {
    std::optional<FileLock> file;
    std::unordered_map<std::string, bool> written;
    AutoCloseFD gcLock;
  };
  Sync<TempRoots> tempRoots;
  unsigned tempCounter = 0;
  std::mutex tempCounterMutex;

  /// Whether `path` is temporarily rooted here and was seen valid since
  /// (so no collector can have removed it).
  bool knownValid(const StorePath& path);
  /// Records that `path`, temporarily rooted here, is valid.
  void markValid(const StorePath& path);
  /// The prepared statement for `sql` on `db` (the store's connection,
  /// whose lock the caller holds), reset and ready to bind.
  SqliteStmt& statement(SqliteDb& db, const std::string& sql);
  /// Row id of `path` in ValidPaths, if valid.
  std::optional<int64_t> pathId(SqliteDb& db, const StorePath& path);
  /// Reads one ValidPaths row (with references) or nullopt.
  std::optional<ValidPathInfo> readInfo(SqliteDb& db, const StorePath& path);
  /// Inserts `info` and its references inside the caller's transaction;
  /// references other than the path itself must already be valid (else
  /// InvalidPathError). Returns the new row id.
  int64_t insertValidPath(SqliteDb& db, const ValidPathInfo& info);
  /// Inserts (or replaces) DerivationOutputs rows of the derivation with
  /// row id `drvId` inside the caller's transaction.
  void insertDerivationOutputs(SqliteDb& db, int64_t drvId,
                               const std::map<std::string, StorePath>& outputs);
  /// Removes the registration of `path` (must have no other referrers).
  void invalidatePath(SqliteDb& db, const StorePath& path);

  /// Exclusive lock serialising adders of `path` (and of the other paths
  /// in its stripe: `locks/add-<first character of the hash>.lock`).
  FileLock lockPath(const StorePath& path);
  /// The lock stripe `path` belongs to (its name's first character).
  static char stripeOf(const StorePath& path);
  /// The lock file of stripe `stripe`.
  std::string stripeLockFile(char stripe) const;
  /// Exclusive lock of stripe `stripe`.
  FileLock lockStripe(char stripe);
  /// What writeTemp checks besides the NAR hash and size, on the same
  /// bytes it writes (nothing is read twice).
  struct TempChecks {
    /// Check info.ca (when set) against the content: the path it gives
    /// and the content hash (checkContentAddress).
    bool verifyCa = true;
    /// When set, receives the bytes of the single regular file the NAR
    /// must hold (a `.drv`; at most kMaxDerivationSize).
    std::string* fileContents = nullptr;
    /// Hash the NAR and compare with info.narHash; off only for a NAR whose
    /// hash the caller computed itself on these bytes (addVerifiedNar): its
    /// size is still counted and compared.
    bool verifyNarHash = true;
  };
  /// Restores the NAR in `nar` under a fresh temporary name, checks it
  /// against `info` (hash, size, no trailing data, `checks`) and makes it
  /// canonical (fsyncing each file if `fsyncEach`); returns the
  /// temporary's path. On failure nothing is left and
  /// HashMismatchError/ContentMismatchError/FormatError/SysError is thrown.
  std::string writeTemp(const ValidPathInfo& info, Source& nar, bool fsyncEach,
                        const TempChecks& checks);
  /// Checks the tree a caller moved to temporary name `tmp` (from
  /// tempPathFor) against `info` as writeTemp checks a NAR, on the NAR
  /// dumped from it (one read, no copy), after making it canonical
  /// (fsyncing each file if `fsyncEach`). Throws as writeTemp; the caller
  /// removes `tmp` on failure.
  void checkAdopted(const ValidPathInfo& info, const std::string& tmp,
                    bool fsyncEach, const TempChecks& checks);
  /// A fresh temporary name under the physical root for adding `path`.
  std::string tempPathFor(const StorePath& path);
  /// The store path a temporary name belongs to, if it is one.
  std::optional<StorePath> pathOfTemp(const std::string& name);
};

/// Makes a freshly written tree canonical: files 0444 (0555 if
/// owner-executable, so no setuid bit survives), directories 0555, mtime 1;
/// with `fsyncEach` every file and directory is fsynced too (else the
/// caller syncs later); with `takeOwnership` every entry owned by another
/// user or group is given to this process's (an adopted build output).
void canonicaliseTree(const std::string& path, bool fsyncEach,
                      bool takeOwnership = false);
/// Sum of the sizes of the regular files and symlinks in a tree.
uint64_t treeSize(const std::string& path);
/// fsyncs a directory.
void syncDirectory(const std::string& dir);
/// Makes everything written to the filesystem holding `dir` durable
/// (syncfs); throws SysError.
void syncFileSystem(const std::string& dir);

/// Deletes a path on scope exit unless dismissed: a failed add leaves
/// nothing behind.
class PathGuard {
 public:
  explicit PathGuard(std::string p) : path_(std::move(p)) {}
  ~PathGuard();
  PathGuard(const PathGuard&) = delete;
  PathGuard& operator=(const PathGuard&) = delete;
  void dismiss() { path_.clear(); }

 private:
  std::string path_;
};

}  // namespace kiln::store
