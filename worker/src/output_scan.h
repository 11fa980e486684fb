#pragma once
/// Hashing, reference scanning and checking of a build's outputs (private
/// to the build runner).

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/common/error.h"
#include "kiln/common/hash.h"
#include "kiln/store/derivation.h"
#include "kiln/store/store_path.h"

namespace kiln::worker {

/// Thrown when the outputs' total NAR size passes the output limit.
class OutputLimitExceeded : public Error {
 public:
  using Error::Error;
};

/// The result of scanning one output.
struct ScannedOutput {
  Hash narHash{HashAlgo::kSha256};
  uint64_t narSize = 0;
  store::StorePathSet references;
  /// Fixed outputs only: the content hash in the derivation's algorithm and
  /// mode (flat: of the file's bytes; recursive: of the NAR).
  std::optional<Hash> contentHash;
};

/// Serialises `physicalPath` to NAR once, hashing (sha256, plus the fixed
/// output's algorithm when `fixed` is given and recursive) and scanning for
/// `candidates`. `totalNarBytes` accumulates across outputs; passing
/// `limit` (non-zero) throws OutputLimitExceeded. Throws Error (from the
/// NAR writer) for unsupported file types.
ScannedOutput scanOutput(const std::string& physicalPath,
                         const store::StorePathSet& candidates,
                         const store::DerivationOutput* fixed,
                         uint64_t& totalNarBytes, uint64_t limit);

/// Checks that a fixed output's algorithm and digest are well-formed;
/// throws FormatError naming the derivation otherwise.
void checkFixedOutputSpec(const store::StoreDir& storeDir,
                          const store::StorePath& drvPath,
                          const store::DerivationOutput& fixed);

/// Checks a fixed output against its declared hash; returns an error
/// message (empty when it matches and has no references).
std::string checkFixedOutput(const store::StoreDir& storeDir,
                             const store::StorePath& drvPath,
                             const store::DerivationOutput& fixed,
                             const ScannedOutput& scanned);

}  // namespace kiln::worker
