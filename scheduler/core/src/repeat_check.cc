// Reproducibility checks' policy (repeat_check.h).
#include "kiln/scheduler/repeat_check.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace kiln::scheduler {

namespace {
// 64-bit FNV-1a: stable across platforms and standard libraries, unlike
// std::hash, so every scheduler picks the same paths.
uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}
}  // namespace

uint32_t repeatFractionToPpm(double fraction) {
  if (!(fraction >= 0.0 && fraction <= 1.0))
    throw std::invalid_argument("repeat fraction must be a number from 0 to 1");
  return static_cast<uint32_t>(std::lround(fraction * kRepeatPpmScale));
}

double repeatPpmToFraction(uint32_t ppm) {
  return static_cast<double>(std::min(ppm, kRepeatPpmScale)) / kRepeatPpmScale;
}

bool selectedForRepeat(std::string_view drvPath, uint32_t ppm) {
  if (ppm == 0 || drvPath.empty()) return false;
  if (ppm >= kRepeatPpmScale) return true;
  return fnv1a64(drvPath) % kRepeatPpmScale < ppm;
}

std::optional<std::string> pickRepeatWorker(
    std::string_view firstWorker, const std::vector<std::string>& candidates) {
  for (auto& c : candidates)
    if (c != firstWorker) return c;
  if (candidates.empty()) return std::nullopt;
  return candidates.front();
}

RepeatVerdict compareRepeat(const std::vector<OutputNarHash>& first,
                            const std::vector<OutputNarHash>& second) {
  std::map<std::string, std::pair<const std::string*, const std::string*>> by;
  for (auto& o : first) by[o.name].first = &o.narHash;
  for (auto& o : second) by[o.name].second = &o.narHash;
  RepeatVerdict v;
  for (auto& [name, hashes] : by) {
    auto [a, b] = hashes;
    if (!a || !b || *a != *b) v.differing.push_back(name);
  }
  v.deterministic = v.differing.empty();
  return v;
}

}  // namespace kiln::scheduler
