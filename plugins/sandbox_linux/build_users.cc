#include "build_users.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "kiln/plugin/plugin.hpp"

namespace kiln::sandbox_linux {

BuildUser::BuildUser(BuildUser&& o) noexcept
    : uid_(o.uid_), lockFd_(o.lockFd_) {
  o.lockFd_ = -1;
}

BuildUser& BuildUser::operator=(BuildUser&& o) noexcept {
  if (this != &o) {
    if (lockFd_ >= 0) ::close(lockFd_);
    uid_ = o.uid_;
    lockFd_ = o.lockFd_;
    o.lockFd_ = -1;
  }
  return *this;
}

BuildUser::~BuildUser() {
  if (lockFd_ >= 0) ::close(lockFd_);  // releases the flock
}

BuildUserPool::BuildUserPool(uid_t first, unsigned count, std::string lockDir)
    : first_(first), count_(count), lockDir_(std::move(lockDir)) {}

BuildUser BuildUserPool::acquire() {
  std::lock_guard lock(mu_);
  if (::mkdir(lockDir_.c_str(), 0700) < 0 && errno != EEXIST)
    throw plugin::Failure::sys("creating the build-user lock directory " +
                               lockDir_);
  for (unsigned i = 0; i < count_; ++i) {
    uid_t uid = first_ + (next_ + i) % count_;
    std::string file = lockDir_ + "/" + std::to_string(uid);
    int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) throw plugin::Failure::sys("opening " + file);
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      next_ = (next_ + i + 1) % count_;
      return BuildUser(uid, fd);
    }
    ::close(fd);
  }
  throw plugin::Failure(KILN_ERR_FAILED, "all " + std::to_string(count_) +
                                             " build users (uids from " +
                                             std::to_string(first_) +
                                             ") are busy");
}

}  // namespace kiln::sandbox_linux
