#pragma once
/// Free space of file systems, behind an interface so that a check before
/// writing (an upload's NAR, docs/operations.md "Limits") can be tested
/// against a full disk without filling one.

#include <atomic>
#include <cstdint>
#include <string>

namespace kiln {

/// How much may still be written below a directory.
class DiskSpace {
 public:
  virtual ~DiskSpace() = default;
  /// Bytes an unprivileged writer may still use on the file system holding
  /// `path`. Throws SysError naming `path` if it cannot be asked.
  virtual uint64_t available(const std::string& path) const = 0;
};

/// statvfs(2): f_bavail × f_frsize.
class RealDiskSpace final : public DiskSpace {
 public:
  uint64_t available(const std::string& path) const override;
  /// A shared instance (stateless).
  static const RealDiskSpace& instance();
};

/// A disk whose free space the test sets (thread-safe).
class FakeDiskSpace final : public DiskSpace {
 public:
  explicit FakeDiskSpace(uint64_t bytes) : bytes_(bytes) {}
  uint64_t available(const std::string&) const override { return bytes_; }
  void set(uint64_t bytes) { bytes_ = bytes; }

 private:
  std::atomic<uint64_t> bytes_;
};

}  // namespace kiln
