// hashDerivationModulo (spec §3.4) with a memoising, iterative graph walk,
// and filling in output paths the way Nix's `derivation` builtin does (§3.5).
#include "derivation_internal.h"
#include "kiln/common/error.h"
#include "kiln/store/derivation.h"

namespace kiln::store {

DrvHashCache::DrvHashCache(StoreDir storeDir, DrvLoader loader)
    : storeDir_(std::move(storeDir)), loader_(std::move(loader)) {}

const Hash& DrvHashCache::hashOf(const StorePath& drvPath) {
  return entry(drvPath).hash;
}

bool DrvHashCache::isDeferred(const StorePath& drvPath) {
  return entry(drvPath).deferred;
}

const DrvHashCache::Entry& DrvHashCache::entry(const StorePath& drvPath) {
  if (auto it = memo_.find(drvPath); it != memo_.end()) return it->second;
  // Depth-first with an explicit stack. A node is loaded when it first
  // reaches the top ("in progress") and hashed once all its inputs are
  // memoised; meeting an in-progress node again means a cycle.
  std::vector<StorePath> stack{drvPath};
  std::map<StorePath, Derivation> inProgress;
  while (!stack.empty()) {
    StorePath cur = stack.back();
    if (memo_.count(cur)) {
      stack.pop_back();
      continue;
    }
    auto it = inProgress.find(cur);
    if (it == inProgress.end()) {
      ++loads_;
      it = inProgress.emplace(cur, loader_(cur)).first;
    }
    bool ready = true;
    for (auto& [input, outs] : it->second.inputDrvs) {
      if (memo_.count(input)) continue;
      if (inProgress.count(input))
        throw FormatError("derivation '" + storeDir_.printPath(cur) +
                          "' depends on itself through '" +
                          storeDir_.printPath(input) + "'");
      stack.push_back(input);
      ready = false;
    }
    if (!ready) continue;
    memo_.emplace(cur, computeEntry(it->second));
    inProgress.erase(it);
    stack.pop_back();
  }
  return memo_.at(drvPath);
}

void DrvHashCache::remember(const StorePath& drvPath, const Derivation& drv) {
  if (memo_.count(drvPath)) return;
  for (auto& [input, outs] : drv.inputDrvs) entry(input);
  memo_.emplace(drvPath, computeEntry(drv));
}

DrvHashCache::Entry DrvHashCache::computeEntry(const Derivation& drv) {
  DerivationType type = derivationType(drv);
  bool deferred =
      type == DerivationType::kFloatingCA || type == DerivationType::kDeferred;
  for (auto& [input, outs] : drv.inputDrvs)
    deferred = deferred || memo_.at(input).deferred;
  return {computeHash(drv, false), deferred};
}

Hash DrvHashCache::computeHash(const Derivation& drv, bool maskOutputs) {
  if (derivationType(drv) == DerivationType::kFixedOutput) {
    const DerivationOutput& o = drv.outputs.begin()->second;
    StorePath path = fixedOutputPath(storeDir_, drv.name, o);
    if (o.path && *o.path != path)
      throw FormatError("fixed-output derivation '" + drv.name +
                        "' has output path '" + storeDir_.printPath(*o.path) +
                        "' but its hash implies '" + storeDir_.printPath(path) +
                        "'");
    return hashString(HashAlgo::kSha256, "fixed:out:" + o.hashAlgo + ":" +
                                             o.hash + ":" +
                                             storeDir_.printPath(path));
  }
  return hashString(HashAlgo::kSha256,
                    printModuloAterm(*this, drv, maskOutputs));
}

Hash DrvHashCache::hashModulo(const Derivation& drv, bool maskOutputs) {
  return computeHash(drv, maskOutputs);
}

std::string printModuloAterm(DrvHashCache& cache, const Derivation& drv,
                             bool maskOutputs) {
  detail::InputHashes inputs;
  for (auto& [path, outs] : drv.inputDrvs)
    inputs[cache.hashOf(path).toHex()].insert(outs.begin(), outs.end());
  return detail::printAterm(cache.storeDir(), drv, maskOutputs, &inputs);
}

namespace {

void fillFixed(Derivation& drv, const StoreDir& sd) {
  DerivationOutput& o = drv.outputs.begin()->second;
  StorePath path = fixedOutputPath(sd, drv.name, o);
  if (o.path && *o.path != path)
    throw FormatError("fixed-output derivation '" + drv.name +
                      "' already has a different output path");
  o.path = path;
  drv.env["out"] = sd.printPath(path);
}

}  // namespace

void fillOutputPaths(Derivation& drv, DrvHashCache& cache) {
  checkDerivationName(drv.name);
  const StoreDir& sd = cache.storeDir();
  switch (derivationType(drv)) {
    case DerivationType::kFixedOutput:
      fillFixed(drv, sd);
      return;
    case DerivationType::kFloatingCA:
      for (auto& [name, o] : drv.outputs) drv.env[name] = hashPlaceholder(name);
      return;
    case DerivationType::kInputAddressed:
    case DerivationType::kDeferred:
      break;
  }
  for (auto& [name, o] : drv.outputs) {
    o.path.reset();
    drv.env[name] = "";
  }
  Hash h = cache.hashModulo(drv, true);
  for (auto& [input, outs] : drv.inputDrvs)
    if (cache.isDeferred(input)) return;  // outputs stay deferred
  for (auto& [name, o] : drv.outputs) {
    o.path = sd.makeOutputPath(name, h, drv.name);
    drv.env[name] = sd.printPath(*o.path);
  }
}

DrvLoader fileDrvLoader(const StoreDir& storeDir, std::string physicalDir) {
  return [storeDir, dir = std::move(physicalDir)](const StorePath& p) {
    return readDerivationFile(storeDir, dir + "/" + p.baseName());
  };
}

}  // namespace kiln::store
