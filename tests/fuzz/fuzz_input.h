#pragma once
// Splitting one fuzz input into parts (shared by the libFuzzer targets).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::fuzz {

/// Splits `data` at each occurrence of `sep` into at most `max` parts (the
/// last takes the rest), so one input can describe several files/frames.
inline std::vector<std::string> splitInput(const uint8_t* data, size_t size,
                                           std::string_view sep, size_t max) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  while (parts.size() + 1 < max) {
    auto at = in.find(sep);
    if (at == std::string_view::npos) break;
    parts.emplace_back(in.substr(0, at));
    in.remove_prefix(at + sep.size());
  }
  parts.emplace_back(in);
  return parts;
}

}  // namespace kiln::fuzz
