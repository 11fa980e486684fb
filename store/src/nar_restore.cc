// Restoring a NAR to the file system without ever leaving the target: every
// object is created relative to an open descriptor of its parent directory,
// with O_EXCL / O_NOFOLLOW, so neither existing nor archive-made symlinks are
// followed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/nar.h"

namespace kiln::store {
namespace {

class Restorer : public NarVisitor {
 public:
  explicit Restorer(const std::string& target)
      : target_(target), rootName_(baseNameOf(target)) {
    std::string parent = dirNameOf(target);
    rootParent_.reset(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!rootParent_) throwSysError("opening directory '" + parent + "'");
  }

  bool created() const { return created_; }

  void createDirectory(const std::string& path) override {
    auto [dirFd, name] = locate(path);
    if (::mkdirat(dirFd, name.c_str(), 0777) != 0) throwSysError("creating directory " + show(path));
    created_ = true;
    AutoCloseFD fd(::openat(dirFd, name.c_str(),
                            O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) throwSysError("opening directory " + show(path));
    dirs_.push_back(std::move(fd));
  }

  void closeDirectory() override { dirs_.pop_back(); }

  void createRegularFile(const std::string& path, bool executable, uint64_t) override {
    auto [dirFd, name] = locate(path);
    file_.reset(::openat(dirFd, name.c_str(),
                         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                         executable ? 0777 : 0666));
    if (!file_) throwSysError("creating file " + show(path));
    created_ = true;
    filePath_ = path;
  }

  void receiveContents(std::string_view data) override {
    while (!data.empty()) {
      ssize_t n = ::write(file_.get(), data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        throwSysError("writing file " + show(filePath_));
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
  }

  void closeRegularFile() override {
    int fd = file_.release();
    if (::close(fd) != 0) throwSysError("closing file " + show(filePath_));
  }

  void createSymlink(const std::string& path, const std::string& target) override {
    auto [dirFd, name] = locate(path);
    if (::symlinkat(target.c_str(), dirFd, name.c_str()) != 0)
      throwSysError("creating symlink " + show(path));
    created_ = true;
  }

 private:
  /// The directory descriptor and entry name where `path` goes.
  std::pair<int, std::string> locate(const std::string& path) {
    if (path.empty()) return {rootParent_.get(), rootName_};
    // The parser reports entries of the innermost open directory only, and
    // names never contain '/', so the last component lives in dirs_.back().
    if (dirs_.empty()) throw Error("NAR restore: entry " + show(path) + " outside a directory");
    auto slash = path.rfind('/');
    return {dirs_.back().get(), slash == std::string::npos ? path : path.substr(slash + 1)};
  }

  std::string show(const std::string& path) const {
    return "'" + (path.empty() ? target_ : target_ + "/" + path) + "'";
  }

  std::string target_;
  std::string rootName_;
  AutoCloseFD rootParent_;
  std::vector<AutoCloseFD> dirs_;
  AutoCloseFD file_;
  std::string filePath_;
  bool created_ = false;
};

// Reports each item to the restorer, then to an observer.
class TeeVisitor : public NarVisitor {
 public:
  TeeVisitor(NarVisitor& first, NarVisitor* second) : a_(first), b_(second) {}
  void createDirectory(const std::string& p) override {
    a_.createDirectory(p);
    if (b_) b_->createDirectory(p);
  }
  void closeDirectory() override {
    a_.closeDirectory();
    if (b_) b_->closeDirectory();
  }
  void createRegularFile(const std::string& p, bool x, uint64_t n) override {
    a_.createRegularFile(p, x, n);
    if (b_) b_->createRegularFile(p, x, n);
  }
  void receiveContents(std::string_view d) override {
    a_.receiveContents(d);
    if (b_) b_->receiveContents(d);
  }
  void closeRegularFile() override {
    a_.closeRegularFile();
    if (b_) b_->closeRegularFile();
  }
  void createSymlink(const std::string& p, const std::string& t) override {
    a_.createSymlink(p, t);
    if (b_) b_->createSymlink(p, t);
  }

 private:
  NarVisitor& a_;
  NarVisitor* b_;
};

uint64_t restoreObserved(const std::string& targetIn, Source& source,
                         const NarLimits& limits, NarVisitor* observer) {
  std::string target = targetIn;
  while (target.size() > 1 && target.back() == '/') target.pop_back();
  auto base = baseNameOf(target);
  if (target.empty() || base == "/" || base == "." || base == "..")
    throw Error("cannot restore to '" + targetIn + "': not a usable target name");
  if (pathExists(target)) throw Error("cannot restore to '" + target + "': it already exists");
  std::unique_ptr<Restorer> r;
  try {
    r = std::make_unique<Restorer>(target);
    TeeVisitor tee(*r, observer);
    return parseNar(source, tee, limits);
  } catch (...) {
    bool created = r && r->created();
    r.reset();  // close descriptors before deleting
    if (created) {
      try {
        deletePath(target);
      } catch (...) {
      }
    }
    throw;
  }
}

}  // namespace

uint64_t restorePath(const std::string& target, Source& source,
                     const NarLimits& limits) {
  return restoreObserved(target, source, limits, nullptr);
}

uint64_t restorePath(const std::string& target, Source& source,
                     const NarLimits& limits, NarVisitor& observer) {
  return restoreObserved(target, source, limits, &observer);
}

}  // namespace kiln::store
