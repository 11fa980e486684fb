#pragma once
// NAR token encoding shared by the writer and the parser (spec §4): a token
// is u64le(len) ‖ bytes ‖ zero padding to a multiple of 8.

#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/common/stream.h"

namespace kiln::store::nar {

/// Padding bytes after a token of `len` bytes.
inline size_t paddingFor(uint64_t len) { return static_cast<size_t>((8 - len % 8) % 8); }

/// The little-endian encoding of `n`.
inline void encodeU64(uint64_t n, char out[8]) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
}

/// The full token for `s` (length, bytes, padding).
inline std::string token(std::string_view s) {
  std::string out(8, '\0');
  encodeU64(s.size(), out.data());
  out.append(s);
  out.append(paddingFor(s.size()), '\0');
  return out;
}

inline void writeU64(Sink& sink, uint64_t n) {
  char b[8];
  encodeU64(n, b);
  sink.write({b, 8});
}

inline void writePadding(Sink& sink, uint64_t len) {
  static const char zeros[8] = {};
  if (size_t p = paddingFor(len)) sink.write({zeros, p});
}

/// Writes a whole token, in one sink write when it is small.
inline void writeString(Sink& sink, std::string_view s) {
  if (s.size() <= 240) {
    char buf[256] = {};
    encodeU64(s.size(), buf);
    s.copy(buf + 8, s.size());
    sink.write({buf, 8 + s.size() + paddingFor(s.size())});
    return;
  }
  writeU64(sink, s.size());
  sink.write(s);
  writePadding(sink, s.size());
}

// Fixed token sequences, concatenated so the writer makes few sink calls.
inline const std::string kMagic = token("nix-archive-1");
inline const std::string kNodeOpen = token("(") + token("type");
inline const std::string kRegularHeader = token("regular") + token("contents");
inline const std::string kRegularExecHeader =
    token("regular") + token("executable") + token("") + token("contents");
inline const std::string kSymlinkHeader = token("symlink") + token("target");
inline const std::string kDirectoryHeader = token("directory");
inline const std::string kEntryName = token("entry") + token("(") + token("name");
inline const std::string kEntryNode = token("node");
inline const std::string kClose = token(")");

}  // namespace kiln::store::nar
