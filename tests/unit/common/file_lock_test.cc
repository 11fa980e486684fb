#include "kiln/common/file_lock.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>

namespace kiln {
namespace {

TEST(FileLock, ExclusiveExcludesOtherHolders) {
  TempDir dir;
  std::string path = dir.path() + "/l";
  auto held = FileLock::acquire(path, LockMode::kExclusive);
  EXPECT_FALSE(FileLock::tryAcquire(path, LockMode::kShared));
  auto shared = FileLock::tryAcquire(dir.path() + "/m", LockMode::kShared);
  ASSERT_TRUE(shared);
  EXPECT_TRUE(FileLock::tryAcquire(dir.path() + "/m", LockMode::kShared));
  EXPECT_FALSE(FileLock::tryAcquire(dir.path() + "/m", LockMode::kExclusive));
}

TEST(FileLock, UnlinkedLockIsNotReused) {
  TempDir dir;
  std::string path = dir.path() + "/l";
  {
    auto a = FileLock::acquire(path, LockMode::kExclusive);
    a.unlinkOnRelease();
  }
  EXPECT_FALSE(pathExists(path));
  // A child waiting on the lock while the holder unlinks it must end up
  // holding a lock on the file that is at the path, not the removed one.
  auto a = std::make_optional(FileLock::acquire(path, LockMode::kExclusive));
  a->unlinkOnRelease();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    close(a->fd());  // the inherited descriptor shares the parent's lock
    ssize_t w = write(ready[1], "x", 1);
    (void)w;
    auto b = FileLock::acquire(path, LockMode::kExclusive);
    struct stat held, now;
    bool same = fstat(b.fd(), &held) == 0 && stat(path.c_str(), &now) == 0 &&
                held.st_ino == now.st_ino;
    _exit(same ? 0 : 1);
  }
  close(ready[1]);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  a.reset();
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace kiln
