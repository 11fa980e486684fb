#pragma once
/// narinfo files (spec §7.2): the metadata a binary cache publishes for one
/// store path, parsed with every field validated and written byte-identically
/// to Nix 2.8.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "kiln/common/hash.h"
#include "kiln/store/store_path.h"

namespace kiln::store {

/// One narinfo file. Value type.
struct NarInfo {
  StorePath path{"00000000000000000000000000000000-x"};
  std::string url;                   ///< relative to the cache root
  std::string compression = "none";  ///< "none", "xz", "zstd", "bzip2", ...
  std::optional<Hash> fileHash;      ///< of the (compressed) file
  std::optional<uint64_t> fileSize;
  Hash narHash;  ///< sha256 of the NAR
  uint64_t narSize = 0;
  StorePathSet references;  ///< may include `path` itself
  std::optional<StorePath> deriver;
  std::string system;          ///< empty = unknown
  std::set<std::string> sigs;  ///< `<keyname>:<base64>`, sorted
  std::string ca;              ///< CA field or empty

  /// Parses a narinfo. `whence` names the file in errors. Throws
  /// FormatError "NAR info file '<whence>' is corrupt: <reason>" when a
  /// required field (StorePath, URL, NarHash, NarSize) is missing or any
  /// field is malformed (store path outside `dir`, bad hash or size, bad
  /// reference or deriver base name, bad signature or CA syntax, a
  /// duplicated key). Unknown keys are ignored; a missing Compression
  /// means bzip2.
  static NarInfo parse(const StoreDir& dir, std::string_view text,
                       std::string_view whence);

  /// The file as Nix 2.8 writes it: StorePath, URL, Compression, FileHash,
  /// FileSize, NarHash, NarSize, References (sorted base names; a trailing
  /// space when empty), Deriver, System, one Sig per line, CA; no blank
  /// lines. Throws Error if FileHash/FileSize are unset or hashes are not
  /// sha256 (a cache never publishes such a narinfo).
  std::string render(const StoreDir& dir) const;
};

/// The file name of a path's narinfo in a cache: `<hashpart>.narinfo`.
std::string narInfoFileName(const StorePath& path);

}  // namespace kiln::store
