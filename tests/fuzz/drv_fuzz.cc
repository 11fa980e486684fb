// libFuzzer target for the `.drv` ATerm parser: any byte string must parse
// or raise a FormatError; the parser is strict, so an accepted input is
// printed back byte for byte, and hashing/checking it never crashes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kiln/common/error.h"
#include "kiln/store/derivation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  kiln::store::StoreDir sd;
  kiln::store::Derivation drv;
  try {
    drv = kiln::store::parseDerivation(sd, in, "fuzz", "fuzz input");
  } catch (const kiln::FormatError&) {
    return 0;
  }
  if (kiln::store::printDerivation(sd, drv) != in) std::abort();
  // Inputs cannot be loaded: hashing and checking must fail cleanly.
  kiln::store::DrvHashCache cache(
      sd, [](const kiln::store::StorePath& p) -> kiln::store::Derivation {
        throw kiln::Error("no input " + p.baseName());
      });
  try {
    kiln::store::StorePathSet refs = drv.inputSrcs;
    for (auto& [p, _] : drv.inputDrvs) refs.insert(p);
    kiln::store::checkDerivationFile(
        cache, kiln::store::derivationPath(sd, drv), in, refs);
  } catch (const kiln::Error&) {
  }
  (void)kiln::store::showDerivationJson(
      sd, {{kiln::store::StorePath(std::string(32, '0') + "-fuzz.drv"), drv}});
  return 0;
}
