#pragma once
/// Reference scanning (spec §6): which candidate store paths' 32-character
/// hash parts occur in a byte stream (normally an output's NAR).

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>

#include "kiln/common/hash.h"
#include "kiln/common/stream.h"
#include "kiln/store/nar.h"
#include "kiln/store/store_path.h"

namespace kiln::store {

/// A Sink that records which candidate hash parts occur in the bytes written
/// to it, in one pass and across write boundaries. Scans for runs of nix32
/// characters and looks each 32-character window up in a hash set, so the
/// cost barely depends on the number of candidates. Tee it with a
/// HashingSink to hash and scan in the same pass.
class RefScanSink : public Sink {
 public:
  /// `hashParts` are 32-character nix32 strings; throws FormatError naming
  /// any other.
  explicit RefScanSink(const std::set<std::string>& hashParts);
  /// Candidates are the hash parts of `paths`.
  explicit RefScanSink(const StorePathSet& paths);

  void write(std::string_view data) override;

  /// The candidate hash parts seen so far.
  const std::set<std::string>& found() const { return found_; }

 private:
  struct ViewHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept;
  };
  void add(std::string_view hashPart);
  void scan(std::string_view buf, size_t maxStart);
  void check(std::string_view window);

  std::unordered_set<std::string, ViewHash, std::equal_to<>> candidates_;
  std::set<std::string> found_;
  std::string tail_;  ///< trailing nix32 run of the data so far (< 32 bytes)
};

/// The candidates of `candidates` whose hash part occurs in `found` (as
/// returned by RefScanSink::found()).
StorePathSet selectReferences(const StorePathSet& candidates,
                              const std::set<std::string>& found);

/// Result of hashing and scanning one path.
struct NarHashAndRefs {
  Hash narHash{HashAlgo::kSha256};  ///< sha256 of the NAR
  uint64_t narSize = 0;             ///< NAR size in bytes
  StorePathSet references;          ///< candidates that occur in the NAR
};

/// Serialises `path` to NAR once, hashing it with sha256 and scanning it for
/// the hash parts of `candidates`. Throws like dumpPath.
NarHashAndRefs hashAndScanPath(const std::string& path,
                               const StorePathSet& candidates,
                               NarFs& fs = realNarFs());

}  // namespace kiln::store
