// libFuzzer target for narinfo files: any text must parse or raise a
// FormatError; an accepted narinfo renders (when it has what rendering
// needs) to text that parses to the same record.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kiln/common/error.h"
#include "kiln/store/narinfo.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  kiln::store::StoreDir sd;
  kiln::store::NarInfo ni;
  try {
    ni = kiln::store::NarInfo::parse(sd, in, "fuzz");
  } catch (const kiln::FormatError&) {
    return 0;
  }
  std::string text;
  try {
    text = ni.render(sd);
  } catch (const kiln::Error&) {
    return 0;  // e.g. no FileHash: Nix-written files always have one
  }
  auto again = kiln::store::NarInfo::parse(sd, text, "rendered");
  if (again.render(sd) != text) std::abort();
  return 0;
}
