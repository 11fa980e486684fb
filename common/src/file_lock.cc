#include "kiln/common/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "kiln/common/error.h"

namespace kiln {

namespace {

int flockOp(LockMode mode) {
  return mode == LockMode::kShared ? LOCK_SH : LOCK_EX;
}

// Takes the lock on `fd`; false if `wait` is off and it is held elsewhere.
bool takeLock(int fd, LockMode mode, bool wait, const std::string& path) {
  int op = flockOp(mode) | (wait ? 0 : LOCK_NB);
  for (;;) {
    if (::flock(fd, op) == 0) return true;
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK && !wait) return false;
    throwSysError("locking '" + path + "'");
  }
}

}  // namespace

std::optional<FileLock> FileLock::lock(const std::string& path, LockMode mode,
                                       bool wait) {
  for (;;) {
    AutoCloseFD fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!fd) throwSysError("opening lock file '" + path + "'");
    if (!takeLock(fd.get(), mode, wait, path)) return std::nullopt;
    // The previous holder may have unlinked the file before we got it; then
    // our lock protects nothing and we start again on a fresh file.
    struct stat held, now;
    if (::fstat(fd.get(), &held) != 0) throwSysError("stat '" + path + "'");
    if (::stat(path.c_str(), &now) != 0) {
      if (errno != ENOENT) throwSysError("stat '" + path + "'");
      continue;
    }
    if (now.st_ino == held.st_ino && now.st_dev == held.st_dev)
      return FileLock(path, std::move(fd));
  }
}

FileLock FileLock::acquire(const std::string& path, LockMode mode) {
  return *lock(path, mode, true);
}

std::optional<FileLock> FileLock::tryAcquire(const std::string& path,
                                             LockMode mode) {
  return lock(path, mode, false);
}

void FileLock::setMode(LockMode mode) {
  takeLock(fd_.get(), mode, true, path_);
}

FileLock::~FileLock() {
  if (!fd_) return;
  if (unlink_) ::unlink(path_.c_str());
  // Closing the descriptor releases the lock.
}

}  // namespace kiln
