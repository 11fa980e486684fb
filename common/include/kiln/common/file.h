#pragma once
/// RAII owners for file descriptors and temporary directories, and small
/// whole-file helpers. Failures throw SysError naming the path.

#include <string>
#include <string_view>

namespace kiln {

/// Owns a file descriptor; closes it on destruction. Move-only.
class AutoCloseFD {
 public:
  AutoCloseFD() = default;
  explicit AutoCloseFD(int fd) : fd_(fd) {}
  ~AutoCloseFD() { reset(); }
  AutoCloseFD(AutoCloseFD&& o) noexcept : fd_(o.release()) {}
  AutoCloseFD& operator=(AutoCloseFD&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  AutoCloseFD(const AutoCloseFD&) = delete;
  AutoCloseFD& operator=(const AutoCloseFD&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  /// Gives up ownership without closing.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  /// Closes the current descriptor (if any) and takes `fd`.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// A directory created under $TMPDIR (or `parent`) and removed recursively
/// on destruction unless keep() was called.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "kiln",
                   const std::string& parent = "");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  /// Leaves the directory on disk.
  void keep() { keep_ = true; }

 private:
  std::string path_;
  bool keep_ = false;
};

/// Reads a whole file.
std::string readFile(const std::string& path);
/// Writes (creates or truncates) a whole file; with `sync`, fsyncs it.
void writeFile(const std::string& path, std::string_view data,
               bool sync = false);
/// Writes all of `data` to `fd`, retrying on short writes and EINTR.
void writeAll(int fd, std::string_view data);
/// Removes a file or directory tree, making directories writable first
/// (store objects are read-only). Missing paths are not an error.
void deletePath(const std::string& path);
/// Whether anything (even a dangling symlink) exists at `path`.
bool pathExists(const std::string& path);
/// Creates `path` and its parents (mode 0755); existing dirs are fine.
void createDirs(const std::string& path);
/// The final component of a path ("/a/b" → "b").
std::string baseNameOf(std::string_view path);
/// All but the final component ("/a/b" → "/a", "a" → ".").
std::string dirNameOf(std::string_view path);
/// Makes `path` absolute against the current directory and removes
/// ".", ".." and duplicate slashes lexically (no symlink resolution).
std::string absPath(std::string_view path);

}  // namespace kiln
