#pragma once
/// Verifying content against what it claims to be (docs/operations.md,
/// "What the farm verifies"): fixed-output content against the hash its
/// derivation declares, content-addressed objects against their CA field,
/// and one-pass scanning of NAR bytes as they arrive (sha256, size,
/// references among candidates, a recursive content hash).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kiln/common/error.h"
#include "kiln/common/hash.h"
#include "kiln/common/stream.h"
#include "kiln/store/content_address.h"
#include "kiln/store/derivation.h"
#include "kiln/store/nar.h"
#include "kiln/store/refs.h"
#include "kiln/store/store_path.h"

namespace kiln::store {

/// Content that does not hash to what it claims; what() names the object
/// and gives both hashes (the declared one first).
class ContentMismatchError : public FormatError {
 public:
  using FormatError::FormatError;
};

/// The content address a fixed output tuple declares (`hashAlgo` "[r:]algo"
/// with algo md5, sha1, sha256 or sha512; `hash` in base16 as .drv files
/// hold it, or nix32 / base64 / SRI). Throws FormatError for a tuple that
/// is not a fixed output, an unknown algorithm or a malformed digest.
ContentAddress fixedOutputCa(const DerivationOutput& fixed);

/// Hashes the contents of a NAR that must hold one regular file (flat and
/// text content addresses); any other node is a FormatError, and so is an
/// executable file for a text hash. Use with parseNar or restorePath.
class SingleFileHasher : public NarVisitor {
 public:
  SingleFileHasher(HashAlgo algo, bool text) : hasher_(algo), text_(text) {}
  void createDirectory(const std::string&) override;
  void createSymlink(const std::string&, const std::string&) override;
  void createRegularFile(const std::string&, bool executable,
                         uint64_t) override;
  void receiveContents(std::string_view data) override { hasher_.update(data); }
  /// The digest; call once, after the whole NAR was parsed.
  Hash finish() { return hasher_.finish(); }

 private:
  HashSink hasher_;
  bool text_;
};

/// The content hash of the NAR in `nar` taken as `method` with `algo`
/// (recursive: of the NAR bytes; flat and text: of the single file's
/// bytes). Reads exactly one NAR, validating it. Throws FormatError for a
/// malformed NAR or one a flat/text hash cannot take.
Hash contentHashOfNar(Source& nar, CaMethod method, HashAlgo algo,
                      const NarLimits& limits = {});

/// Checks the NAR in `nar` against fixed output `fixed` and returns the CA
/// field to register (`fixed:r:sha256:<nix32>`, `fixed:sha1:<nix32>`…,
/// exactly as Nix records it). `what` names the output in errors. Throws
/// ContentMismatchError with both hashes (SRI) on a mismatch, FormatError
/// for a malformed NAR or fixed output.
std::string checkFixedOutputNar(Source& nar, const DerivationOutput& fixed,
                                std::string_view what,
                                const NarLimits& limits = {});

/// As checkFixedOutputNar, for a file or tree on disk (serialised once).
std::string checkFixedOutputPath(const std::string& path,
                                 const DerivationOutput& fixed,
                                 std::string_view what);

/// Checks that `ca` gives the path `path` with references `refs` (which
/// may include `path` itself) and that `actual` (the content hash taken as
/// ca.method with ca.hash's algorithm) equals ca.hash. Throws
/// ContentMismatchError naming the path and both hashes, or FormatError
/// when the CA field cannot address the path.
void checkContentAddress(const StoreDir& dir, const StorePath& path,
                         const StorePathSet& refs, const ContentAddress& ca,
                         const Hash& actual);

/// What NarScanSink found.
struct NarScan {
  Hash narHash{HashAlgo::kSha256};    ///< sha256 of the NAR bytes
  uint64_t narSize = 0;               ///< their number
  StorePathSet references;            ///< candidates whose hash part occurs
  std::optional<Hash> recursiveHash;  ///< the NAR in the extra algorithm
};

/// Takes NAR bytes in chunks as they arrive (an upload) and, in the same
/// pass, hashes them (sha256 and, if asked, one more algorithm for a
/// recursive fixed output) and scans them for the hash parts of
/// `candidates` (Nix's reference scanner, across chunk boundaries). Does
/// not validate the archive: the store does that when it registers it.
class NarScanSink : public Sink {
 public:
  /// `candidates` are copied. `recursiveAlgo`: also hash with that.
  explicit NarScanSink(StorePathSet candidates,
                       std::optional<HashAlgo> recursiveAlgo = std::nullopt);
  void write(std::string_view data) override;
  /// The result; call once, after the last write.
  NarScan finish();

 private:
  StorePathSet candidates_;
  HashSink sha256_;
  std::optional<HashSink> extra_;
  RefScanSink refs_;
};

/// Reads one NAR from `nar` (validating it, reading nothing after it) and
/// scans it as NarScanSink does. Throws FormatError for a malformed NAR.
NarScan scanNar(Source& nar, const StorePathSet& candidates,
                std::optional<HashAlgo> recursiveAlgo = std::nullopt,
                const NarLimits& limits = {});

}  // namespace kiln::store
