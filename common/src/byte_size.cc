#include "kiln/common/byte_size.h"

#include <cstdio>

#include "kiln/common/error.h"

namespace kiln {
namespace {

constexpr char kUnits[] = "KMGT";

}  // namespace

uint64_t parseByteSize(std::string_view text, std::string_view what) {
  auto bad = [&](const std::string& why) {
    return Error(std::string(what) + ": invalid size '" + std::string(text) +
                 "': " + why +
                 " (write a number of bytes, or one with K, M, "
                 "G or T, e.g. 512M or 2G)");
  };
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')
    ++digits;
  if (digits == 0) throw bad("it does not start with a digit");
  int shift = 0;
  if (digits + 1 == text.size()) {
    auto unit = std::string_view(kUnits).find(text[digits]);
    if (unit == std::string_view::npos) throw bad("unknown unit");
    shift = 10 * static_cast<int>(unit + 1);
  } else if (digits != text.size()) {
    throw bad("unknown unit");
  }
  uint64_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    if (value > (uint64_t{1} << 63) / 10) throw bad("too large");
    value = value * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  if (value == 0) throw bad("must be more than 0");
  if (value > ((uint64_t{1} << 63) >> shift)) throw bad("too large");
  return value << shift;
}

std::string formatByteSize(uint64_t bytes) {
  int unit = 0;
  while (unit < 4 && bytes >> (10 * (unit + 1)) != 0) ++unit;
  while (unit > 0 && bytes % (uint64_t{1} << (10 * unit)) != 0 &&
         bytes >> (10 * unit) < 10)
    --unit;  // "1536K" rather than "1.5M" while the number stays small
  if (unit == 0) return std::to_string(bytes);
  uint64_t whole = bytes >> (10 * unit);
  std::string suffix(1, kUnits[unit - 1]);
  if (bytes % (uint64_t{1} << (10 * unit)) == 0)
    return std::to_string(whole) + suffix;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f",
                static_cast<double>(bytes) /
                    static_cast<double>(uint64_t{1} << (10 * unit)));
  return buf + suffix;
}

}  // namespace kiln
