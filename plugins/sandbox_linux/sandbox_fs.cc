#include "sandbox_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "kiln/plugin/plugin.hpp"

namespace kiln::sandbox_linux {
namespace {

using plugin::Failure;

std::vector<std::string> entries(int dirFd) {
  std::vector<std::string> names;
  int dup = ::dup(dirFd);
  if (dup < 0) throw Failure::sys("dup");
  DIR* d = ::fdopendir(dup);
  if (!d) {
    ::close(dup);
    throw Failure::sys("fdopendir");
  }
  while (auto* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

/// Removes the contents of directory `fd` (on device `dev`).
void removeContents(int fd, dev_t dev, const std::string& where) {
  for (auto& name : entries(fd)) {
    struct stat st;
    if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (st.st_dev != dev) continue;  // a mount point: never descend
      ::fchmodat(fd, name.c_str(), 0700, 0);
      int sub = ::openat(fd, name.c_str(),
                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) throw Failure::sys("opening " + where + "/" + name);
      removeContents(sub, dev, where + "/" + name);
      ::close(sub);
      if (::unlinkat(fd, name.c_str(), AT_REMOVEDIR) < 0)
        throw Failure::sys("removing " + where + "/" + name);
    } else if (::unlinkat(fd, name.c_str(), 0) < 0 && errno != ENOENT) {
      throw Failure::sys("removing " + where + "/" + name);
    }
  }
}

void chownContents(int fd, uid_t uid, gid_t gid, const std::string& where) {
  for (auto& name : entries(fd)) {
    if (::fchownat(fd, name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
      throw Failure::sys("chown " + where + "/" + name);
    struct stat st;
    if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0 ||
        !S_ISDIR(st.st_mode))
      continue;
    int sub = ::openat(fd, name.c_str(),
                       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) throw Failure::sys("opening " + where + "/" + name);
    chownContents(sub, uid, gid, where + "/" + name);
    ::close(sub);
  }
}

}  // namespace

void emptyDir(const std::string& path) {
  int fd =
      ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) throw Failure::sys("opening " + path);
  struct stat st;
  try {
    if (::fstat(fd, &st) < 0) throw Failure::sys("stat " + path);
    removeContents(fd, st.st_dev, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

void removeTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) < 0) {
    if (errno == ENOENT) return;
    throw Failure::sys("stat " + path);
  }
  if (S_ISDIR(st.st_mode)) {
    ::chmod(path.c_str(), 0700);
    emptyDir(path);
    if (::rmdir(path.c_str()) < 0) throw Failure::sys("removing " + path);
  } else if (::unlink(path.c_str()) < 0) {
    throw Failure::sys("removing " + path);
  }
}

void chownTree(const std::string& path, uid_t uid, gid_t gid) {
  if (::lchown(path.c_str(), uid, gid) < 0) throw Failure::sys("chown " + path);
  int fd =
      ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;  // not a directory
  try {
    chownContents(fd, uid, gid, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

RootDir::RootDir(const std::string& scratchDir) {
  std::string tmpl = scratchDir + "/kiln-sandbox-XXXXXX";
  if (!::mkdtemp(tmpl.data()))
    throw Failure::sys("creating a sandbox root in " + scratchDir);
  path_ = tmpl;
  if (::chmod(path_.c_str(), 0755) < 0) {
    int err = errno;
    ::rmdir(path_.c_str());
    throw Failure::sys("chmod " + path_, err);
  }
}

RootDir::~RootDir() {
  try {
    removeTree(path_);
  } catch (...) {
    // Left behind; the next start of the worker's scratch cleanup removes it.
  }
}

void RootDir::makeDir(const std::string& inside, mode_t mode) {
  std::string full = path_;
  size_t pos = 1;
  while (pos <= inside.size()) {
    size_t end = inside.find('/', pos);
    if (end == std::string::npos) end = inside.size();
    full += "/" + inside.substr(pos, end - pos);
    bool last = end == inside.size();
    if (::mkdir(full.c_str(), last ? mode : 0755) < 0 && errno != EEXIST)
      throw Failure::sys("creating " + full);
    pos = end + 1;
  }
  if (::chmod(full.c_str(), mode) < 0) throw Failure::sys("chmod " + full);
}

void RootDir::makeParents(const std::string& inside) {
  // Only missing folders are created (0755); existing ones keep their mode
  // (the store directory's 01775).
  std::string full = path_;
  size_t pos = 1;
  for (size_t end; (end = inside.find('/', pos)) != std::string::npos;
       pos = end + 1) {
    full += "/" + inside.substr(pos, end - pos);
    if (::mkdir(full.c_str(), 0755) < 0 && errno != EEXIST)
      throw Failure::sys("creating " + full);
  }
}

bool RootDir::makeMountPoint(const std::string& source,
                             const std::string& inside) {
  struct stat st;
  if (::stat(source.c_str(), &st) < 0) return false;
  makeParents(inside);
  std::string full = host(inside);
  if (S_ISDIR(st.st_mode)) {
    if (::mkdir(full.c_str(), 0755) < 0 && errno != EEXIST)
      throw Failure::sys("creating " + full);
  } else {
    int fd = ::open(full.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw Failure::sys("creating " + full);
    ::close(fd);
  }
  return true;
}

void RootDir::writeFile(const std::string& inside, const std::string& data) {
  std::string full = host(inside);
  int fd = ::open(full.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Failure::sys("creating " + full);
  ssize_t n = ::write(fd, data.data(), data.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(data.size()))
    throw Failure::sys("writing " + full, err);
}

void RootDir::makeSymlink(const std::string& target,
                          const std::string& inside) {
  std::string full = host(inside);
  if (::symlink(target.c_str(), full.c_str()) < 0 && errno != EEXIST)
    throw Failure::sys("creating symlink " + full);
}

}  // namespace kiln::sandbox_linux
