// libFuzzer target for the NAR parser: any byte string must either parse
// or raise a FormatError; parsing, copying and listing must agree, and an
// accepted archive is reproduced byte for byte by copyNar.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kiln/common/error.h"
#include "kiln/store/binary_cache.h"
#include "kiln/store/content_check.h"
#include "kiln/store/nar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  kiln::store::NarLimits limits;
  limits.maxDepth = 64;
  limits.maxTotalSize = 1 << 20;
  uint64_t parsed;
  try {
    kiln::StringSource src(in);
    kiln::store::NullNarVisitor v;
    parsed = kiln::store::parseNar(src, v, limits);
  } catch (const kiln::FormatError&) {
    return 0;
  }
  // Accepted: the other readers must accept the same prefix.
  kiln::StringSource copySrc(in);
  kiln::StringSink out;
  if (kiln::store::copyNar(copySrc, out, limits) != parsed) std::abort();
  if (out.s != in.substr(0, parsed)) std::abort();
  kiln::StringSource listSrc(in);
  (void)kiln::store::narListing(listSrc);
  kiln::StringSource scanSrc(in);
  auto scan = kiln::store::scanNar(scanSrc, {}, std::nullopt, limits);
  if (scan.narSize != parsed) std::abort();
  return 0;
}
