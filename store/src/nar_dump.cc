// NAR writer (spec §4) and the POSIX implementation of NarFs.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "kiln/common/background_sink.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/nar.h"
#include "kiln/store/nar_walker.h"
#include "nar_posix.h"
#include "nar_tokens.h"

namespace kiln::store {
namespace {
constexpr size_t kReadChunk = 128 << 10;
}  // namespace

namespace nar {

std::string fileTypeName(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "of unknown type";
}

void throwUnsupportedType(const std::string& path, mode_t mode) {
  throw Error("cannot archive '" + path + "': it is " + fileTypeName(mode) +
              " (only regular files, directories and symlinks are allowed)");
}

std::string joinPath(const std::string& dir, std::string_view name) {
  std::string out = dir;
  if (name.empty()) return out;
  if (out.empty() || out.back() != '/') out += '/';
  out += name;
  return out;
}

void readOpenFile(int fd, const std::string& dir, std::string_view name,
                  uint64_t size, Sink& sink, std::unique_ptr<char[]>& buf) {
  // A lending sink (BackgroundSink) receives the data without a copy.
  auto* lending = dynamic_cast<LendingSink*>(&sink);
  if (!lending && !buf) buf = std::make_unique<char[]>(kReadChunk);
  // Each read asks for one byte more than remains, so the call that
  // returns the last bytes also shows whether the file has grown.
  uint64_t left = size;
  for (;;) {
    auto [to, room] =
        lending ? lending->lend() : std::pair{buf.get(), kReadChunk};
    size_t want = left < room ? static_cast<size_t>(left) + 1 : room;
    ssize_t n = ::read(fd, to, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      throwSysError("reading '" + joinPath(dir, name) + "'");
    }
    auto got = static_cast<size_t>(n);
    if (got > left)
      throw Error("file '" + joinPath(dir, name) +
                  "' grew while it was being archived");
    if (got == 0) {
      if (left > 0)
        throw Error("file '" + joinPath(dir, name) +
                    "' shrank while it was being archived");
      return;
    }
    if (lending)
      lending->commit(got);
    else
      sink.write({to, got});
    left -= got;
    if (left == 0 && got < want) return;  // a short read: end of file
  }
}

}  // namespace nar

namespace {

class PosixNarFs : public NarFs {
 public:
  Stat stat(const std::string& path) override {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) throwSysError("getting status of '" + path + "'");
    Stat out;
    if (S_ISREG(st.st_mode)) {
      out.type = NarType::kRegular;
      out.executable = (st.st_mode & S_IXUSR) != 0;
      out.size = static_cast<uint64_t>(st.st_size);
    } else if (S_ISDIR(st.st_mode)) {
      out.type = NarType::kDirectory;
    } else if (S_ISLNK(st.st_mode)) {
      out.type = NarType::kSymlink;
    } else {
      nar::throwUnsupportedType(path, st.st_mode);
    }
    return out;
  }

  std::vector<std::string> readDirectory(const std::string& path) override {
    std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(path.c_str()), ::closedir);
    if (!dir) throwSysError("opening directory '" + path + "'");
    std::vector<std::string> names;
    for (;;) {
      errno = 0;
      struct dirent* e = ::readdir(dir.get());
      if (!e) {
        if (errno) throwSysError("reading directory '" + path + "'");
        break;
      }
      std::string_view n = e->d_name;
      if (n == "." || n == "..") continue;
      names.emplace_back(n);
    }
    return names;
  }

  std::string readLink(const std::string& path) override {
    std::string buf(256, '\0');
    for (;;) {
      ssize_t n = ::readlink(path.c_str(), buf.data(), buf.size());
      if (n < 0) throwSysError("reading symlink '" + path + "'");
      if (static_cast<size_t>(n) < buf.size()) {
        buf.resize(static_cast<size_t>(n));
        return buf;
      }
      buf.resize(buf.size() * 2);
    }
  }

  void readFile(const std::string& path, uint64_t size, Sink& sink) override {
    AutoCloseFD fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) throwSysError("opening '" + path + "'");
    nar::readOpenFile(fd.get(), path, "", size, sink, buf_);
  }

 private:
  std::unique_ptr<char[]> buf_;
};

void dumpNode(const std::string& path, Sink& sink, const NarPathFilter& filter,
              NarFs& fs) {
  auto st = fs.stat(path);
  sink.write(nar::kNodeOpen);
  switch (st.type) {
    case NarType::kRegular:
      sink.write(st.executable ? nar::kRegularExecHeader : nar::kRegularHeader);
      nar::writeU64(sink, st.size);
      fs.readFile(path, st.size, sink);
      nar::writePadding(sink, st.size);
      break;
    case NarType::kSymlink:
      sink.write(nar::kSymlinkHeader);
      nar::writeString(sink, fs.readLink(path));
      break;
    case NarType::kDirectory: {
      sink.write(nar::kDirectoryHeader);
      auto names = fs.readDirectory(path);
      std::sort(names.begin(), names.end());
      for (auto& name : names) {
        std::string child = nar::joinPath(path, name);
        if (filter && !filter(child)) continue;
        sink.write(nar::kEntryName);
        nar::writeString(sink, name);
        sink.write(nar::kEntryNode);
        dumpNode(child, sink, filter, fs);
        sink.write(nar::kClose);
      }
      break;
    }
  }
  sink.write(nar::kClose);
}

}  // namespace

NarFs& realNarFs() {
  // One buffer per thread: the accessor is otherwise stateless.
  thread_local PosixNarFs fs;
  return fs;
}

void dumpPath(const std::string& path, Sink& sink, const NarPathFilter& filter,
              NarFs& fs) {
  sink.write(nar::kMagic);
  dumpNode(path, sink, filter, fs);
}

namespace {

/// Writes the NAR of one walker item (not the end of a directory): the
/// object's node, wrapped in an entry when `dirs` (full paths of the
/// directories it is in) is not empty, then closes that node unless it is
/// a directory, whose entries follow. Reads and closes a file's descriptor.
void writeWalkItem(NarWalkItem& item, std::vector<std::string>& dirs,
                   const std::string& root, Sink& sink,
                   std::unique_ptr<char[]>& buf) {
  bool entry = !dirs.empty();
  if (entry) {
    sink.write(nar::kEntryName);
    nar::writeString(sink, item.name);
    sink.write(nar::kEntryNode);
  }
  sink.write(nar::kNodeOpen);
  switch (item.kind) {
    case NarWalkItem::Kind::kRegular:
      sink.write(item.executable ? nar::kRegularExecHeader
                                 : nar::kRegularHeader);
      nar::writeU64(sink, item.size);
      nar::readOpenFile(item.fd.get(), entry ? dirs.back() : root, item.name,
                        item.size, sink, buf);
      item.fd.reset();
      nar::writePadding(sink, item.size);
      break;
    case NarWalkItem::Kind::kSymlink:
      sink.write(nar::kSymlinkHeader);
      nar::writeString(sink, item.target);
      break;
    case NarWalkItem::Kind::kDirectory:
      sink.write(nar::kDirectoryHeader);
      dirs.push_back(entry ? nar::joinPath(dirs.back(), item.name) : root);
      return;
    case NarWalkItem::Kind::kEndDirectory:
      throw Error(
          "internal error: unexpected end of directory in the NAR walk");
  }
  sink.write(nar::kClose);
  if (entry) sink.write(nar::kClose);
}

}  // namespace

void dumpPathAhead(const std::string& path, Sink& sink, size_t capacity) {
  NarTreeWalker walker(path, capacity);
  std::vector<std::string> dirs;  // full paths of the directories being written
  std::unique_ptr<char[]> buf;
  NarWalkItem item;
  sink.write(nar::kMagic);
  while (walker.next(item)) {
    if (item.kind != NarWalkItem::Kind::kEndDirectory) {
      writeWalkItem(item, dirs, path, sink, buf);
      continue;
    }
    if (dirs.empty())
      throw Error("internal error: unbalanced directories in the NAR walk");
    dirs.pop_back();
    sink.write(nar::kClose);                     // the directory's node
    if (!dirs.empty()) sink.write(nar::kClose);  // its entry
  }
}

void dumpString(std::string_view contents, Sink& sink) {
  sink.write(nar::kMagic);
  sink.write(nar::kNodeOpen);
  sink.write(nar::kRegularHeader);
  nar::writeString(sink, contents);
  sink.write(nar::kClose);
}

}  // namespace kiln::store
