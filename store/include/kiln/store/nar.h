#pragma once
/// NAR (Nix ARchive) serialisation, parsing and restoration (spec §4).
///
/// Everything streams: file contents pass through in bounded chunks, so
/// memory stays small whatever the archive size. The parser validates each
/// item before its visitor sees it; restoration writes only below its target
/// and removes the partial target on failure.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/common/stream.h"

namespace kiln::store {

/// The three kinds of file system object a NAR can hold.
enum class NarType : uint8_t { kRegular, kDirectory, kSymlink };

/// The file system as dumpPath sees it. Paths are full paths as given to
/// dumpPath joined with '/' and entry names. Implementations throw Error
/// (SysError for failing calls) naming the path.
class NarFs {
 public:
  /// What dumpPath needs to know about one object (never follows symlinks).
  struct Stat {
    NarType type = NarType::kRegular;
    bool executable = false;  ///< regular files: owner-execute bit set
    uint64_t size = 0;        ///< regular files: byte size
  };
  virtual ~NarFs() = default;
  /// Stats `path` without following a final symlink; throws Error naming the
  /// path for FIFOs, sockets and devices.
  virtual Stat stat(const std::string& path) = 0;
  /// Entry names of directory `path`, without "." and "..", in any order.
  virtual std::vector<std::string> readDirectory(const std::string& path) = 0;
  /// Target of symlink `path`, verbatim.
  virtual std::string readLink(const std::string& path) = 0;
  /// Streams exactly `size` bytes of regular file `path` into `sink` in
  /// bounded chunks; throws Error if the file is shorter or longer.
  virtual void readFile(const std::string& path, uint64_t size,
                        Sink& sink) = 0;
};

/// The real file system (POSIX calls). Shared, stateless between calls.
NarFs& realNarFs();

/// Decides whether an entry (its full path) goes into the archive; the root
/// is always included. An empty filter includes everything.
using NarPathFilter = std::function<bool(const std::string& path)>;

/// Writes the NAR of `path` (file, directory or symlink) to `sink`:
/// directory entries sorted bytewise, executable iff S_IXUSR. Throws Error
/// naming the path for unsupported file types or read failures.
void dumpPath(const std::string& path, Sink& sink,
              const NarPathFilter& filter = {}, NarFs& fs = realNarFs());

/// Writes the NAR of a single non-executable regular file whose contents
/// are `contents`.
void dumpString(std::string_view contents, Sink& sink);

/// Bounds the parser enforces; exceeding one is a FormatError.
struct NarLimits {
  size_t maxNameLength = 255;         ///< directory entry names
  size_t maxTargetLength = 4095;      ///< symlink targets
  uint64_t maxFileSize = uint64_t{1} << 40;   ///< one regular file
  size_t maxDepth = 256;              ///< directory nesting below the root
  uint64_t maxTotalSize = uint64_t{1} << 42;  ///< the whole archive
};

/// Receives the validated structure of a NAR from parseNar. Paths are
/// relative to the root: "" is the root, children are "a", "a/b", ...
/// Calls arrive in archive order; each item is checked before its call
/// (file contents arrive in chunks; the padding after them is checked
/// before closeRegularFile). A FormatError may still come after some calls,
/// so a visitor that writes must clean up when parseNar throws.
class NarVisitor {
 public:
  virtual ~NarVisitor() = default;
  /// A directory; its entries follow, then closeDirectory().
  virtual void createDirectory(const std::string& path) = 0;
  /// End of the most recently opened directory.
  virtual void closeDirectory() {}
  /// A regular file of `size` bytes; contents follow, then
  /// closeRegularFile().
  virtual void createRegularFile(const std::string& path, bool executable,
                                 uint64_t size) = 0;
  /// Next chunk of the current regular file's contents.
  virtual void receiveContents(std::string_view data) = 0;
  /// End of the current regular file.
  virtual void closeRegularFile() {}
  /// A symlink with its target (verbatim, possibly absolute or dangling).
  virtual void createSymlink(const std::string& path,
                             const std::string& target) = 0;
};

/// A visitor that ignores everything: parsing alone validates.
class NullNarVisitor : public NarVisitor {
 public:
  void createDirectory(const std::string&) override {}
  void createRegularFile(const std::string&, bool, uint64_t) override {}
  void receiveContents(std::string_view) override {}
  void createSymlink(const std::string&, const std::string&) override {}
};

/// Parses one NAR from `source`, reading exactly its bytes and nothing after
/// it, and reports it to `visitor`. Throws FormatError
/// ("NAR byte <offset>: <what>") on truncation, bad magic, non-zero padding,
/// unknown tokens or node types, unsorted or duplicate entries, bad names
/// (empty, ".", "..", containing '/' or NUL) and exceeded limits. Returns the
/// archive size in bytes.
uint64_t parseNar(Source& source, NarVisitor& visitor,
                  const NarLimits& limits = {});

/// Writes the NAR from `source` as a tree at `target` (which must not exist;
/// its parent must). Directories get 0777, files 0666 or 0777 if executable
/// (less the umask). Never writes outside `target` (everything is created
/// relative to directory descriptors with O_NOFOLLOW/O_EXCL). On any error
/// the partial target is removed and the error rethrown. Returns the size.
uint64_t restorePath(const std::string& target, Source& source,
                     const NarLimits& limits = {});

/// As restorePath, also reporting every item to `observer` right after it
/// was written (e.g. to hash a single file's contents from the very bytes
/// that are written). An exception from `observer` fails the restore.
uint64_t restorePath(const std::string& target, Source& source,
                     const NarLimits& limits, NarVisitor& observer);

/// Copies one NAR from `source` to `sink`, validating it on the way (as
/// parseNar). Bytes reach `sink` before the archive is known to be complete
/// and valid: on a throw the caller must discard what was written. Returns
/// the size.
uint64_t copyNar(Source& source, Sink& sink, const NarLimits& limits = {});

/// A Source that forwards another source's bytes and writes each byte it
/// returns to a sink (e.g. a HashingSink while restoring). Borrows both.
class TeeSource : public Source {
 public:
  TeeSource(Source& source, Sink& sink) : source_(source), sink_(sink) {}
  size_t read(char* data, size_t len) override {
    size_t n = source_.read(data, len);
    if (n) sink_.write({data, n});
    return n;
  }

 private:
  Source& source_;
  Sink& sink_;
};

}  // namespace kiln::store
