// The tree walker that runs ahead of the NAR writer (kiln/store/nar_walker.h).
#include "kiln/store/nar_walker.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "kiln/common/error.h"
#include "nar_posix.h"

namespace kiln::store {
namespace {

/// Directories deeper than this are listed and closed again; their entries
/// are then reached by full path, so descriptors stay bounded on any tree.
constexpr size_t kHeldDepth = 32;
constexpr size_t kDirentBufferSize = 32 << 10;

/// How much nicer the walker thread is than the thread that started it.
/// With fewer cores than threads (walker, writer, and a hashing thread
/// behind the sink), an equal share for all three starves the hashing
/// thread, which has the most work and cannot be split; at a third of the
/// share the walker mostly runs when the writer or the hasher waits.
constexpr int kWalkerNiceIncrement = 5;

/// Makes the calling thread (Linux: nice values are per thread) less
/// favoured by kWalkerNiceIncrement; best effort.
void lowerPriority() {
  errno = 0;
  int nice = ::getpriority(PRIO_PROCESS, 0);
  if (nice == -1 && errno != 0) return;
  ::setpriority(PRIO_PROCESS, 0, std::min(nice + kWalkerNiceIncrement, 19));
}

/// Unwinds the walker thread when the consumer went away.
struct Stopped {};

const std::string kNoName;

}  // namespace

struct NarTreeWalker::Where {
  int at;                   ///< directory descriptor or AT_FDCWD
  const char* rel;          ///< the object's name relative to `at`
  const std::string* dir;   ///< full path of its directory; null for the root
  const std::string& name;  ///< entry name; "" for the root

  std::string path(const std::string& root) const {
    return dir ? nar::joinPath(*dir, name) : root;
  }
};

NarTreeWalker::NarTreeWalker(std::string root, size_t capacity)
    : root_(std::move(root)), capacity_(std::max<size_t>(capacity, 1)) {
  thread_ = std::thread([this] { run(); });
}

NarTreeWalker::~NarTreeWalker() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

size_t NarTreeWalker::pending() {
  std::lock_guard lock(mutex_);
  return shared_.size() + taken_.size();
}

bool NarTreeWalker::next(NarWalkItem& out) {
  if (taken_.empty()) {
    std::unique_lock lock(mutex_);
    if (shared_.empty() && !done_) {
      consumerWaiting_ = true;
      changed_.wait(lock, [&] { return !shared_.empty() || done_; });
      consumerWaiting_ = false;
    }
    taken_.swap(shared_);
    bool wake = producerWaiting_;
    std::exception_ptr error = error_;
    lock.unlock();
    if (wake) changed_.notify_all();
    if (taken_.empty()) {  // the walk is over
      if (error) std::rethrow_exception(error);
      return false;
    }
  }
  out = std::move(taken_.front());
  taken_.pop_front();
  return true;
}

void NarTreeWalker::run() {
  // The thread's entry: every exception ends here and reaches the consumer.
  lowerPriority();
  try {
    walk();
    finish(nullptr);
  } catch (const Stopped&) {
  } catch (...) {
    finish(std::current_exception());
  }
}

void NarTreeWalker::finish(std::exception_ptr error) {
  std::unique_lock lock(mutex_);
  try {
    for (auto& item : batch_) shared_.push_back(std::move(item));
  } catch (...) {
    if (!error) error = std::current_exception();
  }
  batch_.clear();
  error_ = std::move(error);
  done_ = true;
  lock.unlock();
  changed_.notify_all();
}

void NarTreeWalker::emit(NarWalkItem item) {
  batch_.push_back(std::move(item));
  if (batch_.size() >= std::max<size_t>(1, capacity_ / 4)) publishBatch();
}

void NarTreeWalker::publishBatch() {
  std::unique_lock lock(mutex_);
  auto room = [&] {
    return stop_ || shared_.size() + batch_.size() <= capacity_;
  };
  if (!room()) {
    producerWaiting_ = true;
    changed_.wait(lock, room);
    producerWaiting_ = false;
  }
  if (stop_) throw Stopped{};
  for (auto& item : batch_) shared_.push_back(std::move(item));
  batch_.clear();
  bool wake = consumerWaiting_;
  lock.unlock();
  if (wake) changed_.notify_all();
}

void NarTreeWalker::walk() {
  direntBuffer_.resize(kDirentBufferSize);
  emitByLstat(Where{AT_FDCWD, root_.c_str(), nullptr, kNoName});
  while (!stack_.empty()) {
    Dir& dir = stack_.back();
    if (dir.next < dir.entries.size()) {
      // A directory entry pushes onto stack_: a deque keeps `dir` valid.
      visit(dir, dir.entries[dir.next++]);
      continue;
    }
    stack_.pop_back();
    NarWalkItem end;
    end.kind = NarWalkItem::Kind::kEndDirectory;
    emit(std::move(end));
  }
}

void NarTreeWalker::visit(const Dir& dir, const Entry& entry) {
  std::string full;
  const char* rel = entry.name.c_str();
  if (!dir.fd) {
    full = nar::joinPath(dir.path, entry.name);
    rel = full.c_str();
  }
  Where w{dir.fd ? dir.fd.get() : AT_FDCWD, rel, &dir.path, entry.name};
  // The entry's type saves an lstat; each emitter checks it and falls back
  // to lstat if the object turns out to be something else.
  switch (entry.type) {
    case DT_REG:
      return emitRegular(w, true);
    case DT_LNK:
      return emitSymlink(w, true);
    case DT_DIR:
      return emitDirectory(w, true);
    default:
      return emitByLstat(w);
  }
}

void NarTreeWalker::emitByLstat(const Where& w) {
  struct stat st;
  if (::fstatat(w.at, w.rel, &st, AT_SYMLINK_NOFOLLOW) != 0)
    throwSysError("getting status of '" + w.path(root_) + "'");
  if (S_ISREG(st.st_mode)) return emitRegular(w, false);
  if (S_ISLNK(st.st_mode)) return emitSymlink(w, false);
  if (S_ISDIR(st.st_mode)) return emitDirectory(w, false);
  nar::throwUnsupportedType(w.path(root_), st.st_mode);
}

void NarTreeWalker::emitRegular(const Where& w, bool guessed) {
  AutoCloseFD fd(
      ::openat(w.at, w.rel, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC));
  if (!fd) {
    if (guessed && errno == ELOOP) return emitByLstat(w);  // now a symlink
    throwSysError("opening '" + w.path(root_) + "'");
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    throwSysError("getting status of '" + w.path(root_) + "'");
  if (!S_ISREG(st.st_mode)) {
    if (guessed) return emitByLstat(w);
    throw Error("'" + w.path(root_) +
                "' changed type while it was being archived");
  }
  NarWalkItem item;
  item.kind = NarWalkItem::Kind::kRegular;
  item.name = w.name;
  item.executable = (st.st_mode & S_IXUSR) != 0;
  item.size = static_cast<uint64_t>(st.st_size);
  item.fd = std::move(fd);
  emit(std::move(item));
}

void NarTreeWalker::emitSymlink(const Where& w, bool guessed) {
  std::string target(256, '\0');
  for (;;) {
    ssize_t n = ::readlinkat(w.at, w.rel, target.data(), target.size());
    if (n < 0) {
      if (guessed && errno == EINVAL)
        return emitByLstat(w);  // not a symlink now
      throwSysError("reading symlink '" + w.path(root_) + "'");
    }
    if (static_cast<size_t>(n) < target.size()) {
      target.resize(static_cast<size_t>(n));
      break;
    }
    target.resize(target.size() * 2);
  }
  NarWalkItem item;
  item.kind = NarWalkItem::Kind::kSymlink;
  item.name = w.name;
  item.target = std::move(target);
  emit(std::move(item));
}

void NarTreeWalker::emitDirectory(const Where& w, bool guessed) {
  AutoCloseFD fd(
      ::openat(w.at, w.rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (guessed && (errno == ENOTDIR || errno == ELOOP)) return emitByLstat(w);
    throwSysError("opening directory '" + w.path(root_) + "'");
  }
  Dir dir;
  dir.path = w.path(root_);
  dir.fd = std::move(fd);
  listDirectory(dir);
  if (stack_.size() >= kHeldDepth) dir.fd.reset();
  NarWalkItem item;
  item.kind = NarWalkItem::Kind::kDirectory;
  item.name = w.name;
  emit(std::move(item));
  stack_.push_back(std::move(dir));
}

void NarTreeWalker::listDirectory(Dir& dir) {
  for (;;) {
    ssize_t n =
        ::getdents64(dir.fd.get(), direntBuffer_.data(), direntBuffer_.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throwSysError("reading directory '" + dir.path + "'");
    }
    if (n == 0) break;
    for (ssize_t off = 0; off < n;) {
      const auto* e =
          reinterpret_cast<const struct dirent64*>(direntBuffer_.data() + off);
      off += e->d_reclen;
      std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      dir.entries.push_back({std::string(name), e->d_type});
    }
  }
  std::sort(dir.entries.begin(), dir.entries.end(),
            [](const Entry& a, const Entry& b) { return a.name < b.name; });
}

}  // namespace kiln::store
