// LocalStore: atomic adds (design decision 2) and the per-path locks and
// temporary roots that keep concurrent adders and collectors apart.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "kiln/common/file.h"
#include "kiln/store/nar.h"
#include "local_store_impl.h"
#include "stream_channel.h"

namespace kiln::store {

namespace {

std::atomic<unsigned> gUnique{0};

// Deletes a path on scope exit unless dismissed: a failed add leaves
// nothing behind.
class PathGuard {
 public:
  explicit PathGuard(std::string p) : path_(std::move(p)) {}
  ~PathGuard() {
    if (path_.empty()) return;
    try {
      deletePath(path_);
    } catch (...) {
    }
  }
  void set(std::string p) { path_ = std::move(p); }
  void dismiss() { path_.clear(); }

 private:
  std::string path_;
};

}  // namespace

// ------------------------------------------------- files made canonical

void syncDirectory(const std::string& dir) {
  AutoCloseFD fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) throwSysError("opening directory '" + dir + "'");
  if (::fsync(fd.get()) != 0) throwSysError("fsync '" + dir + "'");
}

void canonicaliseTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) throwSysError("lstat '" + path + "'");
  const timespec times[2] = {{1, 0}, {1, 0}};  // atime, mtime = epoch + 1s
  if (S_ISLNK(st.st_mode)) {
    if (::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0)
      throwSysError("setting the time of '" + path + "'");
    return;
  }
  if (S_ISDIR(st.st_mode)) {
    for (auto& e : std::filesystem::directory_iterator(path))
      canonicaliseTree(e.path().string());
  } else if (!S_ISREG(st.st_mode)) {
    throw Error("'" + path + "' is neither a file, a directory nor a symlink");
  }
  int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
              (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0);
  AutoCloseFD fd(::open(path.c_str(), flags));
  if (!fd) throwSysError("opening '" + path + "'");
  mode_t mode = S_ISDIR(st.st_mode) || (st.st_mode & S_IXUSR) ? 0555 : 0444;
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

FileLock LocalStore::Impl::lockPath(const StorePath& path) {
  auto lock = FileLock::acquire(locksDir + "/" + path.baseName() + ".lock",
                                LockMode::kExclusive);
  lock.unlinkOnRelease();
  return lock;
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
  // A running collector reads every temp roots file while holding gc.lock
  // exclusively; holding it shared here means it sees all or none of a line.
  auto gc = FileLock::acquire(impl_->gcLockPath, LockMode::kShared);
  writeAll(tr->file->fd(), path.baseName() + "\n");
  tr->written.insert(path.baseName());
}

// ------------------------------------------------------------------ adds

void LocalStore::addFromNar(const ValidPathInfo& info, Source& nar) {
  const auto& path = info.path;
  if (info.narHash.algo() != HashAlgo::kSha256)
    throw FormatError("NAR hash of '" + printPath(path) + "' must be sha256");
  addTempRoot(path);
  for (auto& r : info.references)
    if (r != path) addTempRoot(r);
  if (isValid(path)) return;
  auto lock = impl_->lockPath(path);
  if (isValid(path)) return;  // another process added it meanwhile
  for (auto& r : info.references)
    if (r != path && !isValid(r))
      throw InvalidPathError("cannot add '" + printPath(path) +
                             "': its reference '" + printPath(r) +
                             "' is not valid");

  std::string tmp = impl_->tempPathFor(path);
  PathGuard guard(tmp);
  HashingSink hasher(HashAlgo::kSha256);
  TeeSource tee(nar, hasher);
  restorePath(tmp, tee);
  char extra;
  if (nar.read(&extra, 1) != 0)
    throw FormatError("trailing data after the NAR of '" + printPath(path) + "'");
  auto [hash, size] = hasher.finish();
  if (hash != info.narHash || size != info.narSize)
    throw HashMismatchError(
        "NAR of '" + printPath(path) + "' does not match its metadata: expected " +
        info.narHash.toNix32() + " (" + std::to_string(info.narSize) +
        " bytes), got " + hash.toNix32() + " (" + std::to_string(size) +
        " bytes)");
  canonicaliseTree(tmp);

  // A leftover from an add that died between rename and registration.
  std::string final = physicalPath(path);
  if (pathExists(final)) deletePath(final);
  if (::rename(tmp.c_str(), final.c_str()) != 0)
    throwSysError("renaming '" + tmp + "' to '" + final + "'");
  guard.set(final);
  syncDirectory(impl_->physicalRoot);
  impl_->registerValidPath(info);
  guard.dismiss();
}

StorePath LocalStore::addPath(const std::string& fsPath, std::string_view name,
                              const NarPathFilter& filter) {
  std::string src = absPath(fsPath);
  std::string nm = name.empty() ? baseNameOf(src) : std::string(name);
  checkStorePathName(nm);
  HashingSink first(HashAlgo::kSha256);
  dumpPath(src, first, filter);
  auto [hash, size] = first.finish();
  ValidPathInfo info(storeDir().makeSourcePath(nm, hash, {}, false));
  info.narHash = hash;
  info.narSize = size;
  info.ca = makeFixedCa(true, hash);
  addTempRoot(info.path);
  if (isValid(info.path)) return info.path;
  // Second pass: the tree is serialised again straight into the restorer;
  // addFromNar's hash check catches a tree that changed in between.
  StreamChannel chan([&](Sink& sink) { dumpPath(src, sink, filter); });
  try {
    addFromNar(info, chan.source());
  } catch (const HashMismatchError&) {
    throw Error("'" + src + "' changed while it was being added to the store");
  }
  return info.path;
}

StorePath LocalStore::addText(std::string_view name, std::string_view contents,
                              const StorePathSet& refs) {
  auto hash = hashString(HashAlgo::kSha256, contents);
  ValidPathInfo info(storeDir().makeTextPath(name, hash, refs));
  StringSink nar;
  dumpString(contents, nar);
  info.narHash = hashString(HashAlgo::kSha256, nar.s);
  info.narSize = nar.s.size();
  info.references = refs;
  info.ca = makeTextCa(hash);
  StringSource src(nar.s);
  addFromNar(info, src);
  return info.path;
}

}  // namespace kiln::store
