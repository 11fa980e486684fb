#pragma once
/// Reproducibility checks (docs/release.md, "Reproducibility checks"): the
/// pure policy that picks which successful steps of a jobset are built a
/// second time, on which worker, and what the two builds' NAR hashes say.
/// No I/O; the service records and dispatches what it decides.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::scheduler {

/// One million: a jobset's repeat share is kept in parts per million so
/// that both database backends store it as an integer.
inline constexpr uint32_t kRepeatPpmScale = 1000000;

/// The parts per million of `fraction` (0 = off, 1 = every step), rounded
/// to the nearest. Throws std::invalid_argument unless 0 <= fraction <= 1
/// (NaN included).
uint32_t repeatFractionToPpm(double fraction);

/// The fraction that `ppm` parts per million stand for (ppm above the scale
/// count as the whole).
double repeatPpmToFraction(uint32_t ppm);

/// Whether the successful step of `drvPath` is built again for a jobset
/// that repeats `ppm` parts per million of its steps. Deterministic: the
/// same path gets the same answer on every scheduler and every run (a
/// 64-bit FNV-1a hash of the path, reduced modulo one million, below
/// `ppm`), and a larger share selects a superset of a smaller one's paths.
bool selectedForRepeat(std::string_view drvPath, uint32_t ppm);

/// The worker to build a repeat on: the first of `candidates` (in the
/// caller's order of preference, each able to run the step now) that is
/// not `firstWorker`, or, when every candidate is `firstWorker`, that
/// worker itself; nullopt when there is no candidate.
std::optional<std::string> pickRepeatWorker(
    std::string_view firstWorker, const std::vector<std::string>& candidates);

/// One output of a build as its NAR hash identifies it.
struct OutputNarHash {
  std::string name;     ///< "out", "dev", ...
  std::string narHash;  ///< "sha256:…" as the store records it
  bool operator==(const OutputNarHash&) const = default;
};

/// What a repeat said about a step.
struct RepeatVerdict {
  /// Every output of the first build was rebuilt with the same NAR hash.
  bool deterministic = true;
  /// The outputs whose NAR hashes differ, or that one build has and the
  /// other lacks, sorted by name without duplicates.
  std::vector<std::string> differing;
  bool operator==(const RepeatVerdict&) const = default;
};

/// Compares the outputs of the first build and of its repeat by NAR hash.
RepeatVerdict compareRepeat(const std::vector<OutputNarHash>& first,
                            const std::vector<OutputNarHash>& second);

}  // namespace kiln::scheduler
