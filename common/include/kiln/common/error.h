#pragma once
/// Error types shared by every kiln module.
///
/// Modules throw exceptions derived from `kiln::Error` inside their own code;
/// they are caught at plugin boundaries, thread entries and message handlers.

#include <stdexcept>
#include <string>

namespace kiln {

/// Base of all kiln errors. `what()` is the full message, context included.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

/// A database whose schema this kiln version cannot use (newer, or older
/// than it may migrate by itself); the message says what to run.
class SchemaError : public Error {
 public:
  using Error::Error;
};

/// Input that does not follow its format (hash strings, store paths, .drv,
/// NAR, narinfo, protocol messages, config).
class FormatError : public Error {
 public:
  using Error::Error;
};

/// A failing system call; the message names the call, the object (usually a
/// path) and strerror(errno).
class SysError : public Error {
 public:
  SysError(const std::string& what, int err);
  /// The errno value captured when the error was made.
  int errNo() const { return errno_; }

 private:
  int errno_;
};

/// Throws SysError for `what` with the current errno.
[[noreturn]] void throwSysError(const std::string& what);

}  // namespace kiln
