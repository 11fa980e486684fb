#pragma once
// Shared by the in-tree evaluator plugins (compiled into each; plugins link
// no kiln library): runs a helper program (`kiln eval`, `nix-instantiate`)
// to completion with its stdout and stderr captured apart.

#include <cstddef>
#include <string>
#include <vector>

namespace kiln::plugin_support {

/// What a finished command printed and how it ended.
struct CaptureResult {
  int exitCode = -1;       ///< exit status, or 128 + the signal
  std::string out;         ///< standard output (at most the limit)
  std::string err;         ///< standard error (at most the limit)
  bool truncated = false;  ///< a stream went over the limit (rest dropped)
};

/// Runs `argv` (argv[0] looked up in PATH; stdin /dev/null; the caller's
/// environment) in `cwd` ("" = the caller's) and waits for it. Each stream
/// keeps at most `limit` bytes. Throws kiln::plugin::Failure
/// (KILN_ERR_SYSTEM) when it cannot be started.
CaptureResult runCapture(const std::vector<std::string>& argv,
                         const std::string& cwd = "",
                         size_t limit = size_t{256} << 20);

/// The last `maxBytes` of `text` (for an error message), "…" marking a cut.
std::string tailOf(const std::string& text, size_t maxBytes = 4000);

}  // namespace kiln::plugin_support
