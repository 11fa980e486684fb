#pragma once
/// Sizes as operators write them ("512M", "2G"): the limits of builds
/// (docs/worker.md, "Limits per build").

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

/// Parses a positive size: decimal digits, optionally followed by one of
/// K, M, G, T (powers of 1024). Throws Error naming `what` and the value
/// for anything else: empty, zero, a sign, spaces, another suffix, or more
/// than 2^63 bytes.
uint64_t parseByteSize(std::string_view text, std::string_view what);

/// `bytes` the way parseByteSize reads them back when exact ("512M",
/// "2G", "1000"), else rounded to one decimal with its unit ("1.5G").
std::string formatByteSize(uint64_t bytes);

}  // namespace kiln
