#include "kiln/common/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "kiln/common/error.h"

namespace kiln {

void AutoCloseFD::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

TempDir::TempDir(const std::string& prefix, const std::string& parent) {
  std::string base = parent;
  if (base.empty()) {
    const char* t = std::getenv("TMPDIR");
    base = t && *t ? t : "/tmp";
  }
  std::string templ = base + "/" + prefix + "-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throwSysError("creating temporary directory in " + base);
  path_ = buf.data();
}

TempDir::~TempDir() {
  if (keep_) return;
  try {
    deletePath(path_);
  } catch (...) {
  }
}

// A regular file is read straight into a string of its size: appending
// 64 KiB pieces to a growing string reallocated and copied it ~log2(size /
// 64 KiB) times, each on fresh pages (gen-strings 50,000's 20 MB
// packages.nix: ~35 ms of CPU, serial before evaluation threads start).
// What stat does not size (a /proc file, a pipe), or a file that grew
// meanwhile, is read on in pieces until the end.
std::string readFile(const std::string& path) {
  AutoCloseFD fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throwSysError("opening '" + path + "'");
  auto readSome = [&](char* to, size_t room) {
    for (;;) {
      ssize_t n = ::read(fd.get(), to, room);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR) throwSysError("reading '" + path + "'");
    }
  };
  struct stat st;
  const size_t size =
      ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) ? static_cast<size_t>(st.st_size) : 0;
  std::string out(size, '\0');
  size_t got = 0;
  while (got < size) {
    size_t n = readSome(out.data() + got, size - got);
    if (n == 0) {  // shorter than stat said
      out.resize(got);
      return out;
    }
    got += n;
  }
  char buf[65536];
  while (size_t n = readSome(buf, sizeof buf)) out.append(buf, n);
  return out;
}

void writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throwSysError("writing to file descriptor " + std::to_string(fd));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void writeFile(const std::string& path, std::string_view data, bool sync) {
  AutoCloseFD fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
  if (!fd) throwSysError("opening '" + path + "' for writing");
  writeAll(fd.get(), data);
  if (sync && ::fsync(fd.get()) != 0) throwSysError("fsync '" + path + "'");
}

void deletePath(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto st = fs::symlink_status(path, ec);
  if (ec || !fs::exists(st)) return;
  if (fs::is_directory(st)) {
    ::chmod(path.c_str(), 0755);
    for (auto& e : fs::directory_iterator(path)) deletePath(e.path().string());
  }
  if (fs::remove(path, ec); ec)
    throw SysError("removing '" + path + "'", ec.value());
}

bool pathExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

void createDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw SysError("creating directory '" + path + "'", ec.value());
}

std::string baseNameOf(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  auto slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string dirNameOf(std::string_view path) {
  auto slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

std::string absPath(std::string_view path) {
  std::string full(path);
  if (full.empty() || full[0] != '/') {
    auto cwd = std::filesystem::current_path().string();
    full = cwd + "/" + full;
  }
  std::vector<std::string_view> parts;
  std::string_view rest(full);
  while (!rest.empty()) {
    auto slash = rest.find('/');
    auto part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  // Appended piecewise: GCC 12 at -O3 warns (-Wrestrict, a false positive,
  // GCC bug 105651) on `"/" + std::string(p)` inlined into this loop.
  std::string out;
  for (auto p : parts) {
    out += '/';
    out.append(p);
  }
  return out.empty() ? "/" : out;
}

}  // namespace kiln
