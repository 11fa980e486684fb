#pragma once
// Build users (Nix's build-users-group, kiln's own range): when the worker
// runs as root, each build runs as a host uid taken from a pool, locked
// with a lock file per uid so that workers sharing a host never run two
// builds as one uid. An unprivileged worker can map only its own uid, so
// it needs no pool.

#include <sys/types.h>

#include <mutex>
#include <string>

namespace kiln::sandbox_linux {

/// A uid (and the gid of the same number) held for one build.
class BuildUser {
 public:
  BuildUser() = default;
  BuildUser(uid_t uid, int lockFd) : uid_(uid), lockFd_(lockFd) {}
  BuildUser(BuildUser&& o) noexcept;
  BuildUser& operator=(BuildUser&& o) noexcept;
  ~BuildUser();
  /// The host uid (also the host gid).
  uid_t uid() const { return uid_; }

 private:
  uid_t uid_ = 0;
  int lockFd_ = -1;
};

/// The pool: `count` uids from `first`, lock files in `lockDir`.
class BuildUserPool {
 public:
  BuildUserPool(uid_t first, unsigned count, std::string lockDir);
  /// Takes a free uid; throws kiln::plugin::Failure when all are busy.
  /// Thread-safe.
  BuildUser acquire();

 private:
  uid_t first_;
  unsigned count_;
  std::string lockDir_;
  std::mutex mu_;
  unsigned next_ = 0;  // where the next search starts (spreads uids)
};

}  // namespace kiln::sandbox_linux
