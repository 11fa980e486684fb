// Substitution before `kiln build` builds (substitute.h).
#include "substitute.h"

#include <iostream>
#include <memory>
#include <set>

#include "kiln/common/error.h"
#include "kiln/store/cache_copy.h"
#include "kiln/store/derivation.h"

namespace kiln::cli {
namespace {

// An opened cache, or the reason it cannot be used.
struct Cache {
  std::unique_ptr<store::CacheStorage> storage;
  std::unique_ptr<store::BinaryCacheReader> reader;
  bool broken = false;
};

// Copies `outputs` from the first cache that has all of them and whose
// data is trusted and sound; how many paths it copied, or nullopt.
std::optional<size_t> fetch(std::vector<Cache>& caches,
                            store::LocalStore& store,
                            const store::StorePathSet& outputs,
                            const store::ImportOptions& opts) {
  for (auto& c : caches) {
    if (c.broken) continue;
    try {
      auto r = store::copyClosureFromCache(*c.reader, store, outputs, opts);
      if (!r.copied.empty())
        std::cerr << "copied " << r.copied.size() << " paths from "
                  << c.storage->uri() << "\n";
      return r.copied.size();
    } catch (const store::CachePathNotFound&) {
      // Not there: the next cache, or a build.
    } catch (const std::exception& e) {
      std::cerr << "kiln build: warning: not using " << c.storage->uri() << ": "
                << e.what() << "\n";
      c.broken = true;
    }
  }
  return std::nullopt;
}

}  // namespace

size_t substituteOutputs(store::LocalStore& store,
                         const std::vector<store::StorePath>& drvs,
                         const SubstituteOptions& options) {
  std::vector<Cache> caches;
  for (auto& url : options.urls) {
    Cache c;
    c.storage = store::openCacheStorage(url);
    c.reader = std::make_unique<store::BinaryCacheReader>(*c.storage,
                                                          store.storeDir());
    caches.push_back(std::move(c));
  }
  store::ImportOptions opts{options.trust};
  size_t copied = 0;
  std::vector<store::StorePath> todo(drvs.rbegin(), drvs.rend());
  std::set<store::StorePath> seen(drvs.begin(), drvs.end());
  while (!todo.empty()) {
    auto drvPath = todo.back();
    todo.pop_back();
    auto drv = store::readDerivationFile(store.storeDir(),
                                         store.physicalPath(drvPath));
    std::map<std::string, store::StorePath> outputs;
    store::StorePathSet missing;
    for (auto& [name, out] : drv.outputs) {
      if (!out.path) continue;  // floating or deferred: built
      outputs.emplace(name, *out.path);
      if (!store.isValid(*out.path)) missing.insert(*out.path);
    }
    if (missing.empty() && !outputs.empty()) continue;
    if (!missing.empty() && outputs.size() == drv.outputs.size()) {
      if (auto n = fetch(caches, store, missing, opts)) {
        copied += *n;
        store.registerDerivationOutputs(drvPath, outputs);
        continue;
      }
    }
    for (auto& [input, _] : drv.inputDrvs)
      if (seen.insert(input).second) todo.push_back(input);
  }
  return copied;
}

}  // namespace kiln::cli
