// hashDerivationModulo (spec §3.4) with a memoising, iterative graph walk,
// and filling in output paths the way Nix's `derivation` builtin does (§3.5).
#include <algorithm>
#include <cstring>

#include "derivation_internal.h"
#include "kiln/common/encoding.h"
#include "kiln/common/error.h"
#include "kiln/store/derivation.h"

namespace kiln::store {

namespace {

// The hash of `aterm` (a `.drv` ATerm, its inputs list at `inputsSpan`)
// with the list of input hashes in place of the inputs: the ATerm
// hashDerivationModulo hashes, fed to SHA-256 in three pieces instead of
// printed or copied. `inputsText` is that list as the masked ATerm printed
// it (same inputs, same printer), or empty to print it here.
Hash splicedHash(std::string_view aterm, std::pair<size_t, size_t> inputsSpan,
                 const detail::InputHashes& inputs, std::string_view inputsText) {
  thread_local std::string list;  // as computeHash's scratch
  if (inputsText.empty()) {
    list.clear();
    detail::printAtermInputHashes(list, inputs);
    inputsText = list;
  }
  HashSink sink(HashAlgo::kSha256);
  sink.update(aterm.substr(0, inputsSpan.first));
  sink.update(inputsText);
  sink.update(aterm.substr(inputsSpan.second));
  return sink.finish();
}

// hashDerivationModulo of a fixed-output derivation: its output's hash and
// path, not its ATerm.
Hash fixedOutputHash(const StoreDir& sd, const DerivationOutput& o, const StorePath& path) {
  thread_local std::string text;  // as computeHash's scratch
  text.assign("fixed:out:").append(o.hashAlgo).append(":").append(o.hash).append(":");
  text.append(sd.dir()).append("/").append(path.baseName());
  return hashString(HashAlgo::kSha256, text);
}

}  // namespace

DrvHashCache::DrvHashCache(StoreDir storeDir, DrvLoader loader)
    : storeDir_(std::move(storeDir)), loader_(std::move(loader)) {}

Hash DrvHashCache::hashOf(const StorePath& drvPath) {
  return entry(drvPath).hash();
}

bool DrvHashCache::isDeferred(const StorePath& drvPath) {
  return entry(drvPath).deferred;
}

std::string_view DrvHashCache::keepKey(std::string_view baseName) {
  if (keeper_) return keeper_(baseName);
  constexpr size_t kChunk = 64 << 10;
  if (baseName.size() > keyLeft_) {
    size_t size = std::max(kChunk, baseName.size());
    keyChunks_.emplace_back(new char[size]);
    keyCur_ = keyChunks_.back().get();
    keyLeft_ = size;
  }
  std::memcpy(keyCur_, baseName.data(), baseName.size());
  std::string_view key(keyCur_, baseName.size());
  keyCur_ += baseName.size();
  keyLeft_ -= baseName.size();
  return key;
}

DrvHashCache::Entry& DrvHashCache::memoise(std::string_view baseName, const Entry& e) {
  return memo_.insert(keepKey(baseName), e).value;
}

const DrvHashCache::Entry& DrvHashCache::entry(const StorePath& drvPath) {
  if (auto* it = memo_.find(drvPath.baseName())) return it->value;
  // Depth-first with an explicit stack. A node is loaded when it first
  // reaches the top ("in progress") and hashed once all its inputs are
  // memoised; meeting an in-progress node again means a cycle.
  std::vector<StorePath> stack{drvPath};
  std::map<StorePath, Derivation> inProgress;
  while (!stack.empty()) {
    StorePath cur = stack.back();
    if (memo_.find(cur.baseName())) {
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
      if (memo_.find(input.baseName())) continue;
      if (inProgress.count(input))
        throw FormatError("derivation '" + storeDir_.printPath(cur) +
                          "' depends on itself through '" +
                          storeDir_.printPath(input) + "'");
      stack.push_back(input);
      ready = false;
    }
    if (!ready) continue;
    memoise(cur.baseName(), computeEntry(it->second));
    inProgress.erase(it);
    stack.pop_back();
  }
  return memo_.find(drvPath.baseName())->value;
}

void DrvHashCache::remember(const StorePath& drvPath, const Derivation& drv) {
  if (memo_.find(drvPath.baseName())) return;
  memoise(drvPath.baseName(), computeEntry(drv));
}

detail::InputHashes DrvHashCache::inputHashes(const Derivation& drv,
                                              bool& deferred,
                                              std::vector<uint32_t>* tags) {
  detail::InputHashes inputs;
  deferred = false;
  for (auto& [path, outs] : drv.inputDrvs) {
    const Entry& e = entry(path);
    if (tags) tags->push_back(e.tag);
    deferred = deferred || e.deferred;
    inputs[e.sha256].insert(outs.begin(), outs.end());
  }
  return inputs;
}

DrvHashCache::Entry DrvHashCache::computeEntry(const Derivation& drv) {
  bool inputDeferred;
  detail::InputHashes inputs = inputHashes(drv, inputDeferred);
  return entryOf(drv, inputs, inputDeferred);
}

DrvHashCache::Entry DrvHashCache::entryOf(const Derivation& drv,
                                          const detail::InputHashes& inputs,
                                          bool inputDeferred,
                                          std::string_view aterm,
                                          std::pair<size_t, size_t> inputsSpan,
                                          std::string_view inputsText) {
  DerivationType type = derivationType(drv);
  bool deferred = inputDeferred || type == DerivationType::kFloatingCA ||
                  type == DerivationType::kDeferred;
  const DerivationOutput* fixed =
      type == DerivationType::kFixedOutput ? &drv.outputs.begin()->second : nullptr;
  Hash h = aterm.empty() ? computeHash(drv, type, false, inputs)
           : fixed       ? fixedOutputHash(storeDir_, *fixed, *fixed->path)
                         : splicedHash(aterm, inputsSpan, inputs, inputsText);
  Entry e{{}, deferred};
  std::memcpy(e.sha256.data(), h.data(), e.sha256.size());
  return e;
}

Hash DrvHashCache::computeHash(const Derivation& drv, DerivationType type,
                               bool maskOutputs,
                               const detail::InputHashes& inputs) {
  if (type == DerivationType::kFixedOutput) {
    const DerivationOutput& o = drv.outputs.begin()->second;
    StorePath path = fixedOutputPath(storeDir_, drv.name, o);
    if (o.path && *o.path != path)
      throw FormatError("fixed-output derivation '" + drv.name +
                        "' has output path '" + storeDir_.printPath(*o.path) +
                        "' but its hash implies '" + storeDir_.printPath(path) +
                        "'");
    return fixedOutputHash(storeDir_, o, path);
  }
  // Reused (no buffer per ATerm); per thread, as addDerivation may hash
  // on several threads at once.
  thread_local std::string scratch;
  scratch.clear();
  detail::printAterm(scratch, storeDir_, drv, maskOutputs, &inputs);
  return hashString(HashAlgo::kSha256, scratch);
}

Hash DrvHashCache::hashModulo(const Derivation& drv, bool maskOutputs) {
  bool inputDeferred;
  detail::InputHashes inputs = inputHashes(drv, inputDeferred);
  return computeHash(drv, derivationType(drv), maskOutputs, inputs);
}

std::string printModuloAterm(DrvHashCache& cache, const Derivation& drv,
                             bool maskOutputs) {
  detail::InputHashes inputs;
  for (auto& [path, outs] : drv.inputDrvs) {
    Hash h = cache.hashOf(path);  // always SHA-256
    std::array<uint8_t, 32> key;
    std::memcpy(key.data(), h.data(), key.size());
    inputs[key].insert(outs.begin(), outs.end());
  }
  return detail::printAterm(cache.storeDir(), drv, maskOutputs, &inputs);
}

void DrvHashCache::fillOutputs(Derivation& drv,
                               const detail::InputHashes& inputs,
                               bool inputDeferred, std::string* aterm,
                               std::pair<size_t, size_t>* inputsSpan,
                               std::string_view* inputsText) {
  checkDerivationName(drv.name);
  const StoreDir& sd = storeDir_;
  auto printFinal = [&] {
    if (aterm) detail::printAterm(*aterm, sd, drv, false, nullptr, inputsSpan);
  };
  DerivationType type = derivationType(drv);
  if (type == DerivationType::kFixedOutput) {
    DerivationOutput& o = drv.outputs.begin()->second;
    StorePath path = fixedOutputPath(sd, drv.name, o);
    if (o.path && *o.path != path)
      throw FormatError("fixed-output derivation '" + drv.name +
                        "' already has a different output path");
    o.path = path;
    drv.env["out"] = sd.printPath(path);
    return printFinal();
  }
  if (type == DerivationType::kFloatingCA) {
    for (auto& [name, o] : drv.outputs) drv.env[name] = hashPlaceholder(name);
    return printFinal();
  }
  for (auto& [name, o] : drv.outputs) {
    o.path.reset();
    drv.env[name] = "";
  }
  // Masking leaves every output without a path: the ATerm no longer tells
  // input-addressed from deferred, and both hash the same way. Reused
  // buffers, per thread (as computeHash's).
  thread_local std::string masked;
  thread_local detail::OutputSlots slots;
  masked.clear();
  slots.clear();
  std::pair<size_t, size_t> maskedInputs;
  detail::printAterm(masked, sd, drv, true, &inputs, &maskedInputs, &slots);
  Hash h = hashString(HashAlgo::kSha256, masked);
  if (inputsText)
    *inputsText = std::string_view(masked).substr(
        maskedInputs.first, maskedInputs.second - maskedInputs.first);
  if (!inputDeferred) {  // else outputs stay deferred
    for (auto& [name, o] : drv.outputs) {
      o.path = sd.makeOutputPath(name, h, drv.name);
      drv.env[name] = sd.printPath(*o.path);
    }
  }
  // The final ATerm differs from the masked one only in the output paths
  // and the inputs list: spliced, not printed again.
  if (aterm) detail::atermFromMasked(*aterm, masked, maskedInputs, slots, sd, drv, *inputsSpan);
}

void fillOutputPaths(Derivation& drv, DrvHashCache& cache) {
  bool inputDeferred;
  detail::InputHashes inputs = cache.inputHashes(drv, inputDeferred);
  cache.fillOutputs(drv, inputs, inputDeferred);
}

StorePath DrvHashCache::addDerivation(Derivation& drv, std::string& aterm,
                                      uint32_t** tag,
                                      std::vector<uint32_t>* inputTags,
                                      SpinMutex* memoMutex,
                                      std::string_view* key) {
  auto lock = [memoMutex] {
    return memoMutex ? std::unique_lock<SpinMutex>(*memoMutex) : std::unique_lock<SpinMutex>();
  };
  bool inputDeferred;
  detail::InputHashes inputs;
  {
    auto held = lock();
    inputs = inputHashes(drv, inputDeferred, inputTags);
  }
  aterm.clear();
  std::pair<size_t, size_t> inputsSpan;
  // The masked ATerm's list of input hashes (in fillOutputs' buffer, kept
  // until this thread's next fillOutputs), empty when none was printed.
  std::string_view inputsText;
  fillOutputs(drv, inputs, inputDeferred, &aterm, &inputsSpan, &inputsText);
  StorePath path = detail::derivationPathOf(storeDir_, drv, aterm);
  auto modulo = [&] {
    return entryOf(drv, inputs, inputDeferred, aterm, inputsSpan, inputsText);
  };
  std::optional<Entry> fresh;  // hashed unlocked when others may add
  if (memoMutex) fresh = modulo();
  auto held = lock();
  auto* it = memo_.find(path.baseName());
  if (!it) {  // hashed first: a throw adds nothing
    Entry e = fresh ? *fresh : modulo();
    it = &memo_.insert(keepKey(path.baseName()), e);
  }
  Entry& e = it->value;
  e.checked = true;  // its outputs were computed just above
  if (tag) *tag = &e.tag;
  if (key) *key = it->key;
  return path;
}

DrvLoader fileDrvLoader(const StoreDir& storeDir, std::string physicalDir) {
  return [storeDir, dir = std::move(physicalDir)](const StorePath& p) {
    return readDerivationFile(storeDir, dir + "/" + p.baseName());
  };
}

}  // namespace kiln::store
