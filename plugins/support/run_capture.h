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

/// Runs `argv` (argv[0] looked up in the caller's PATH; stdin /dev/null)
/// in `cwd` ("" = the caller's) with environment `env` ("NAME=VALUE"
/// entries; nullptr = the caller's) and waits for it. Each stream keeps at
/// most `limit` bytes. Throws kiln::plugin::Failure (KILN_ERR_SYSTEM) when
/// it cannot be started.
CaptureResult runCapture(const std::vector<std::string>& argv,
                         const std::string& cwd = "",
                         size_t limit = size_t{256} << 20,
                         const std::vector<std::string>* env = nullptr);

/// A clean environment for an evaluation of untrusted code: of the
/// caller's variables only those named in `keep` (exact names, or
/// prefixes ending in '*'), then `set` ("NAME=VALUE", replacing a kept
/// one of the same name). Secrets the caller holds in its environment
/// (tokens, keys, credentials) are not passed on.
std::vector<std::string> cleanEnvironment(
    const std::vector<std::string>& keep, const std::vector<std::string>& set);

/// The last `maxBytes` of `text` (for an error message), "…" marking a cut.
std::string tailOf(const std::string& text, size_t maxBytes = 4000);

}  // namespace kiln::plugin_support
