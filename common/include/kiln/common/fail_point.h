#pragma once
/// Named fail points for crash tests (docs/operations.md, "Fail points").
///
/// `KILN_FAIL_POINT("store.add.before-commit")` kills the process at once
/// (SIGKILL to itself: no destructor, no flush, no handler runs, as in a
/// power cut or `kill -9`) when the environment variable KILN_FAIL_POINT
/// names that point. `KILN_FAIL_POINT=NAME:N` kills it at the N-th time the
/// point is reached (1 = the first). The variable is read once, at the
/// first fail point reached; with it unset a fail point costs one relaxed
/// atomic load.

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

/// A parsed KILN_FAIL_POINT value: which point to fail at, and at which
/// hit. Thread-safe.
class FailPointSpec {
 public:
  /// Parses "NAME" or "NAME:N" (N ≥ 1); "" arms nothing. Throws FormatError
  /// for an empty name or a malformed count.
  explicit FailPointSpec(std::string_view spec);
  /// Whether some point is armed.
  bool armed() const { return !name_.empty(); }
  const std::string& name() const { return name_; }
  /// Counts a hit of `point`; true when this hit is the armed one.
  bool hit(std::string_view point);

 private:
  std::string name_;
  uint64_t at_ = 1;
  std::atomic<uint64_t> hits_{0};
};

/// The process's spec from $KILN_FAIL_POINT (parsed at the first call; a
/// malformed value is reported on stderr and arms nothing).
FailPointSpec& processFailPoints();

/// Kills the process with SIGKILL if `point` is the armed fail point (after
/// writing "kiln: fail point POINT reached" to stderr). Never returns then.
void failPoint(std::string_view point);

}  // namespace kiln

/// Marks a crash-test boundary named `name` (a string literal).
#define KILN_FAIL_POINT(name) ::kiln::failPoint(name)
