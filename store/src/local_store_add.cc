// LocalStore: atomic adds (design decision 2) and the per-path locks and
// temporary roots that keep concurrent adders and collectors apart.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>

#include "kiln/common/file.h"
#include "kiln/store/nar.h"
#include "local_store_impl.h"

namespace kiln::store {

namespace {

std::atomic<unsigned> gUnique{0};

}  // namespace

PathGuard::~PathGuard() {
  if (path_.empty()) return;
  try {
    deletePath(path_);
  } catch (...) {
  }
}

// ------------------------------------------------- files made canonical

void syncDirectory(const std::string& dir) {
  AutoCloseFD fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) throwSysError("opening directory '" + dir + "'");
  if (::fsync(fd.get()) != 0) throwSysError("fsync '" + dir + "'");
}

void syncFileSystem(const std::string& dir) {
  AutoCloseFD fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) throwSysError("opening directory '" + dir + "'");
  if (::syncfs(fd.get()) != 0)
    throwSysError("syncing the filesystem of '" + dir + "'");
}

void canonicaliseTree(const std::string& path, bool fsyncEach,
                      bool takeOwnership) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) throwSysError("lstat '" + path + "'");
  // A tree made by someone else (a build user's output): the store's owner
  // takes it, so that user cannot change it once it is valid.
  if (takeOwnership && (st.st_uid != ::geteuid() || st.st_gid != ::getegid()) &&
      ::lchown(path.c_str(), ::geteuid(), ::getegid()) != 0)
    throwSysError("taking ownership of '" + path + "'");
  const timespec times[2] = {{1, 0}, {1, 0}};  // atime, mtime = epoch + 1s
  if (S_ISLNK(st.st_mode)) {
    if (::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0)
      throwSysError("setting the time of '" + path + "'");
    return;
  }
  if (S_ISDIR(st.st_mode)) {
    for (auto& e : std::filesystem::directory_iterator(path))
      canonicaliseTree(e.path().string(), fsyncEach, takeOwnership);
  } else if (!S_ISREG(st.st_mode)) {
    throw Error("'" + path + "' is neither a file, a directory nor a symlink");
  }
  mode_t mode = S_ISDIR(st.st_mode) || (st.st_mode & S_IXUSR) ? 0555 : 0444;
  if (!fsyncEach) {
    // A fresh temporary tree nobody else writes: by name, no descriptor.
    if (::chmod(path.c_str(), mode) != 0) throwSysError("chmod '" + path + "'");
    if (::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0)
      throwSysError("setting the time of '" + path + "'");
    return;
  }
  int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
              (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0);
  AutoCloseFD fd(::open(path.c_str(), flags));
  if (!fd) throwSysError("opening '" + path + "'");
  if (::fsync(fd.get()) != 0) throwSysError("fsync '" + path + "'");
  if (::fchmod(fd.get(), mode) != 0) throwSysError("chmod '" + path + "'");
  if (::futimens(fd.get(), times) != 0)
    throwSysError("setting the time of '" + path + "'");
}

uint64_t treeSize(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return 0;
  if (!S_ISDIR(st.st_mode)) return static_cast<uint64_t>(st.st_size);
  uint64_t total = 0;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(path, ec))
    total += treeSize(e.path().string());
  return total;
}

// --------------------------------------------------- locks and temp names

char LocalStore::Impl::stripeOf(const StorePath& path) {
  return path.baseName()[0];
}

std::string LocalStore::Impl::stripeLockFile(char stripe) const {
  return locksDir + "/add-" + std::string(1, stripe) + ".lock";
}

FileLock LocalStore::Impl::lockStripe(char stripe) {
  return FileLock::acquire(stripeLockFile(stripe), LockMode::kExclusive);
}

FileLock LocalStore::Impl::lockPath(const StorePath& path) {
  return lockStripe(stripeOf(path));
}

std::string LocalStore::Impl::tempPathFor(const StorePath& path) {
  return physicalRoot + "/" + std::string(kStoreTempPrefix) +
         std::to_string(::getpid()) + "-" + std::to_string(gUnique++) + "-" +
         path.baseName();
}

std::optional<StorePath> LocalStore::Impl::pathOfTemp(const std::string& name) {
  if (!name.starts_with(kStoreTempPrefix)) return std::nullopt;
  auto rest = std::string_view(name).substr(kStoreTempPrefix.size());
  for (int field = 0; field < 2; ++field) {
    auto dash = rest.find('-');
    if (dash == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(dash + 1);
  }
  try {
    return StorePath(rest);
  } catch (const FormatError&) {
    return std::nullopt;
  }
}

namespace {

// Holds a shared flock on an already open descriptor for one scope.
class SharedFlock {
 public:
  SharedFlock(int fd, const std::string& path) : fd_(fd) {
    while (::flock(fd_, LOCK_SH) != 0)
      if (errno != EINTR) throwSysError("locking '" + path + "'");
  }
  ~SharedFlock() { ::flock(fd_, LOCK_UN); }
  SharedFlock(const SharedFlock&) = delete;
  SharedFlock& operator=(const SharedFlock&) = delete;

 private:
  int fd_;
};

}  // namespace

void LocalStore::addTempRoot(const StorePath& path) {
  auto tr = impl_->tempRoots.lock();
  if (tr->written.count(path.baseName())) return;
  if (!tr->file) {
    auto name = impl_->tempRootsDir + "/" + std::to_string(::getpid()) + "-" +
                std::to_string(gUnique++);
    tr->file.emplace(FileLock::acquire(name, LockMode::kShared));
    if (::ftruncate(tr->file->fd(), 0) != 0)
      throwSysError("truncating '" + name + "'");
  }
  if (!tr->gcLock) {
    tr->gcLock.reset(::open(impl_->gcLockPath.c_str(),
                            O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!tr->gcLock) throwSysError("opening '" + impl_->gcLockPath + "'");
  }
  // A running collector reads every temp roots file while holding gc.lock
  // exclusively; holding it shared here means it sees all or none of a line.
  SharedFlock gc(tr->gcLock.get(), impl_->gcLockPath);
  writeAll(tr->file->fd(), path.baseName() + "\n");
  tr->written.emplace(path.baseName(), false);
}

bool LocalStore::Impl::knownValid(const StorePath& path) {
  auto tr = tempRoots.lock();
  auto it = tr->written.find(path.baseName());
  return it != tr->written.end() && it->second;
}

void LocalStore::Impl::markValid(const StorePath& path) {
  auto tr = tempRoots.lock();
  auto it = tr->written.find(path.baseName());
  if (it != tr->written.end()) it->second = true;
}

// ------------------------------------------------------------------ adds

void LocalStore::setContentSync(ContentSync sync) {
  impl_->contentSync = sync;
  // The registrations are as durable as the files they describe: with no
  // fsync of the files, no fsync of each commit either (WAL with
  // synchronous = NORMAL, as Nix's store). A power loss may then lose the
  // last commits, never the database's consistency; a lost commit only
  // unregisters a path whose files were not durable anyway.
  (*impl_->db.lock())
      ->exec(sync == ContentSync::kNone ? "PRAGMA synchronous = NORMAL"
                                        : "PRAGMA synchronous = FULL");
}

LocalStore::ContentSync LocalStore::contentSync() const {
  return impl_->contentSync;
}

void LocalStore::setClock(const Clock& clock) { impl_->clock = &clock; }

// A single add is a batch of one whose files are fsynced one by one (no
// syncfs of a filesystem others may be filling), unless the store is set
// to ContentSync::kNone.

void LocalStore::addFromNar(const ValidPathInfo& info, Source& nar) {
  Batch batch(*this, Batch::Sync::kEachFile);
  batch.addFromNar(info, nar);
  batch.commit();
}

void LocalStore::adoptTree(const ValidPathInfo& info, const std::string& tree) {
  Batch batch(*this, Batch::Sync::kEachFile);
  batch.adoptTree(info, tree);
  batch.commit();
}

StorePath LocalStore::addPath(const std::string& fsPath, std::string_view name,
                              const NarPathFilter& filter) {
  Batch batch(*this, Batch::Sync::kEachFile);
  auto path = batch.addPath(fsPath, name, filter);
  batch.commit();
  return path;
}

StorePath LocalStore::addText(std::string_view name, std::string_view contents,
                              const StorePathSet& refs) {
  Batch batch(*this, Batch::Sync::kEachFile);
  auto path = batch.addText(name, contents, refs);
  batch.commit();
  return path;
}

}  // namespace kiln::store
