// Re-deriving a `.drv`'s output paths from its contents (what Nix checks
// when it registers a derivation): nobody can register a `.drv` that claims
// another derivation's outputs.
#include "derivation_internal.h"
#include "kiln/common/error.h"
#include "kiln/store/derivation.h"

namespace kiln::store {
namespace {

[[noreturn]] void incorrect(const StoreDir& sd, const StorePath& drvPath,
                            const std::string& what, const std::string& got,
                            const std::string& want) {
  throw FormatError("derivation '" + sd.printPath(drvPath) +
                    "' has incorrect " + what + " '" + got + "', should be '" +
                    want + "'");
}

// Checks output `name`'s path and its env entry against `want`.
void expectOutput(const StoreDir& sd, const StorePath& drvPath,
                  const Derivation& drv, const std::string& name,
                  const StorePath& want) {
  const DerivationOutput& o = drv.outputs.at(name);
  std::string wantS = sd.printPath(want);
  if (!o.path || *o.path != want)
    incorrect(sd, drvPath, "output '" + name + "'",
              o.path ? sd.printPath(*o.path) : "", wantS);
  auto env = drv.env.find(name);
  if (env == drv.env.end() || env->second != wantS)
    incorrect(sd, drvPath, "environment variable '" + name + "'",
              env == drv.env.end() ? "" : env->second, wantS);
}

}  // namespace

void checkDerivationOutputs(DrvHashCache& cache, const StorePath& drvPath,
                            const Derivation& drv) {
  const StoreDir& sd = cache.storeDir();
  if (cache.outputsChecked(drvPath.baseName())) return;
  DerivationType type = derivationType(drv);
  bool inputDeferred;
  detail::InputHashes inputs = cache.inputHashes(drv, inputDeferred);
  switch (type) {
    case DerivationType::kFixedOutput: {
      const auto& [name, o] = *drv.outputs.begin();
      expectOutput(sd, drvPath, drv, name, fixedOutputPath(sd, drv.name, o));
      break;
    }
    case DerivationType::kFloatingCA:
      for (auto& [name, o] : drv.outputs) {
        auto env = drv.env.find(name);
        if (env == drv.env.end() || env->second != hashPlaceholder(name))
          incorrect(sd, drvPath, "environment variable '" + name + "'",
                    env == drv.env.end() ? "" : env->second,
                    hashPlaceholder(name));
      }
      break;
    case DerivationType::kDeferred:
      if (!inputDeferred)
        throw FormatError("derivation '" + sd.printPath(drvPath) +
                          "' has outputs without paths but no input whose "
                          "outputs are unknown");
      break;
    case DerivationType::kInputAddressed: {
      if (inputDeferred)
        throw FormatError("derivation '" + sd.printPath(drvPath) +
                          "' has output paths although an input's outputs "
                          "are unknown until it is built");
      Hash h = cache.computeHash(drv, DerivationType::kDeferred, true, inputs);
      for (auto& [name, o] : drv.outputs)
        expectOutput(sd, drvPath, drv, name,
                     sd.makeOutputPath(name, h, drv.name));
      break;
    }
  }
  auto* it = cache.memo_.find(drvPath.baseName());
  DrvHashCache::Entry& e =
      it ? it->value
         : cache.memoise(drvPath.baseName(),
                         cache.entryOf(drv, inputs, inputDeferred));
  e.checked = true;
}

Derivation checkDerivationFile(DrvHashCache& cache, const StorePath& drvPath,
                               std::string_view contents,
                               const StorePathSet& references) {
  const StoreDir& sd = cache.storeDir();
  std::string printed = sd.printPath(drvPath);
  if (!drvPath.isDerivation())
    throw FormatError("'" + printed + "' is not a derivation path");
  // The path pins the contents (a `.drv` is the text path of its bytes and
  // references), so a memoised check of this path holds for these bytes.
  StorePath pinned = sd.makeTextPath(
      drvPath.name(), hashString(HashAlgo::kSha256, contents), references);
  if (pinned != drvPath)
    throw FormatError("'" + printed +
                      "' is not the text path of its contents and "
                      "references (that is '" +
                      sd.printPath(pinned) + "')");
  std::string_view name = drvPath.name();
  name.remove_suffix(4);  // ".drv"
  Derivation drv = parseDerivation(sd, contents, name, printed);
  StorePathSet want = drv.inputSrcs;
  for (auto& [p, _] : drv.inputDrvs) want.insert(p);
  if (references != want) {
    for (auto& p : want)
      if (!references.count(p))
        throw FormatError("derivation '" + printed + "' uses '" +
                          sd.printPath(p) + "' but does not refer to it");
    for (auto& p : references)
      if (!want.count(p))
        throw FormatError("derivation '" + printed + "' refers to '" +
                          sd.printPath(p) +
                          "', which is not one of its inputs");
  }
  checkDerivationOutputs(cache, drvPath, drv);
  return drv;
}

}  // namespace kiln::store
