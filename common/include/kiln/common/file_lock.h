#pragma once
/// Advisory whole-file locks (flock) between processes, held by an RAII
/// object. Lock files can be removed by their holder (`unlinkOnRelease`)
/// without racing a waiter: after each acquisition the lock checks that the
/// file it locked is still the one at the path, and retries otherwise.

#include <optional>
#include <string>

#include "kiln/common/file.h"

namespace kiln {

/// Shared (many readers) or exclusive (one writer).
enum class LockMode { kShared, kExclusive };

/// A held lock on a file; released (and the descriptor closed) on
/// destruction. Move-only.
class FileLock {
 public:
  /// Creates `path` if missing (mode 0600) and waits for the lock.
  /// Throws SysError naming the path.
  static FileLock acquire(const std::string& path, LockMode mode);
  /// As acquire() but returns nullopt instead of waiting when another open
  /// file holds a conflicting lock.
  static std::optional<FileLock> tryAcquire(const std::string& path,
                                            LockMode mode);

  FileLock(FileLock&&) noexcept = default;
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock();

  /// Removes the file when released (it is unlinked while still locked, so
  /// waiters notice and retry on a fresh file).
  void unlinkOnRelease() { unlink_ = true; }
  /// Switches between shared and exclusive while held (may wait).
  void setMode(LockMode mode);
  const std::string& path() const { return path_; }
  int fd() const { return fd_.get(); }

 private:
  FileLock(std::string path, AutoCloseFD fd)
      : path_(std::move(path)), fd_(std::move(fd)) {}
  static std::optional<FileLock> lock(const std::string& path, LockMode mode,
                                      bool wait);

  std::string path_;
  AutoCloseFD fd_;
  bool unlink_ = false;
};

}  // namespace kiln
