#pragma once
// Host-side file system work of the linux sandbox: the per-build root
// folder (created before the builder starts, removed after), and the
// ownership changes a build user needs.

#include <sys/stat.h>
#include <sys/types.h>

#include <string>

namespace kiln::sandbox_linux {

/// Removes `path` and everything below it without following symlinks or
/// crossing into another file system (a mount point is left alone), making
/// directories writable first. Missing is fine. Throws plugin::Failure.
void removeTree(const std::string& path);

/// Removes everything below directory `path` (as removeTree does) and
/// keeps `path` itself. Throws plugin::Failure.
void emptyDir(const std::string& path);

/// chown -R without following symlinks. Throws plugin::Failure.
void chownTree(const std::string& path, uid_t uid, gid_t gid);

/// A per-build root folder, removed with everything in it on destruction.
class RootDir {
 public:
  /// Creates `<scratchDir>/kiln-sandbox-XXXXXX`, mode 0755.
  explicit RootDir(const std::string& scratchDir);
  ~RootDir();
  RootDir(const RootDir&) = delete;
  RootDir& operator=(const RootDir&) = delete;

  /// The root's absolute host path.
  const std::string& path() const { return path_; }
  /// `path() + inside` (inside is absolute, e.g. "/nix/store").
  std::string host(const std::string& inside) const { return path_ + inside; }
  /// Creates directory `inside` (and missing parents, 0755) with `mode`.
  void makeDir(const std::string& inside, mode_t mode = 0755);
  /// Creates the missing parents of `inside` (0755).
  void makeParents(const std::string& inside);
  /// Creates an empty mount point for `source` at `inside`: a directory
  /// for a directory, else an empty file. Returns false if `source` is
  /// missing.
  bool makeMountPoint(const std::string& source, const std::string& inside);
  /// Writes a file (mode 0644).
  void writeFile(const std::string& inside, const std::string& contents);
  /// Creates a symlink at `inside` pointing to `target`.
  void makeSymlink(const std::string& target, const std::string& inside);

 private:
  std::string path_;
};

}  // namespace kiln::sandbox_linux
