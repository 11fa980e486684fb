#pragma once
/// Content-address fields (`CA:` in narinfo, the `ca` column of the store
/// database): `text:sha256:<nix32>`, `fixed:<algo>:<nix32>` (flat) and
/// `fixed:r:<algo>:<nix32>` (recursive), spec §2.

#include <string>
#include <string_view>

#include "kiln/common/hash.h"
#include "kiln/store/store_path.h"

namespace kiln::store {

/// How the content hash of a content-addressed object was taken.
enum class CaMethod : uint8_t {
  kText,       ///< `text:`: sha256 of the file contents (toFile, .drv)
  kFlat,       ///< `fixed:`: hash of a single regular file's bytes
  kRecursive,  ///< `fixed:r:`: hash of the NAR serialisation
};

/// A parsed CA field. Value type.
struct ContentAddress {
  CaMethod method = CaMethod::kRecursive;
  Hash hash;

  /// Parses a CA field; throws FormatError naming the field and the
  /// problem (unknown prefix, text with a non-sha256 hash, bad digest).
  static ContentAddress parse(std::string_view text);
  /// The canonical printed form (digest in nix32).
  std::string render() const;

  /// The store path this content address gives an object named `name`
  /// with references `refs` (other paths) and, if `selfRef`, a reference
  /// to itself. Throws FormatError for combinations Nix cannot address
  /// (text objects referring to themselves, flat files with references).
  StorePath makePath(const StoreDir& dir, std::string_view name,
                     const StorePathSet& refs, bool selfRef) const;
};

}  // namespace kiln::store
