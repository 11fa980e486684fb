#include "kiln/scheduler/drv_prefetch.h"

#include <algorithm>

#include "kiln/common/file.h"

namespace kiln::scheduler {

store::Derivation readCheckedDrv(store::LocalStore& store,
                                 store::DrvHashCache& cache,
                                 const store::StorePath& path) {
  auto info = store.queryPathInfo(path);
  if (!info)
    throw store::InvalidPathError("derivation " + store.printPath(path) +
                                  " is not valid in the central store");
  return store::checkDerivationFile(
      cache, path, readFile(store.physicalPath(path)), info->references);
}

std::shared_ptr<const DrvMap> prefetchDrvs(
    store::LocalStore& store, const std::vector<std::string>& roots,
    const DrvMap* checked) {
  auto map = std::make_shared<DrvMap>();
  store::DrvHashCache cache(
      store.storeDir(),
      store::fileDrvLoader(store.storeDir(), store.physicalRoot()));
  auto known = [&](const std::string& p) {
    std::shared_ptr<const store::Derivation> none;
    if (!checked) return none;
    auto it = checked->find(p);
    return it == checked->end() ? none : it->second;
  };
  std::vector<std::string> todo(roots.begin(), roots.end());
  while (!todo.empty()) {
    std::string p = std::move(todo.back());
    todo.pop_back();
    if (p.empty() || map->count(p)) continue;
    std::shared_ptr<const store::Derivation> drv = known(p);
    if (!drv) {
      try {
        drv = std::make_shared<const store::Derivation>(
            readCheckedDrv(store, cache, store.parsePath(p)));
      } catch (const std::exception&) {
        continue;  // ingestion reads it again and reports the error
      }
    }
    for (auto& [in, outs] : drv->inputDrvs) todo.push_back(store.printPath(in));
    map->emplace(std::move(p), std::move(drv));
  }
  return map;
}

void orderJobsByDepth(std::vector<Job>& jobs, const DrvMap& drvs,
                      const store::StoreDir& dir) {
  // Depth = longest chain of input derivations below; iterative post-order
  // with memo (deep chains must not exhaust the stack). A cycle (invalid
  // input) is cut where it closes.
  std::unordered_map<const store::Derivation*, size_t> depth;
  auto depthOf = [&](const std::string& root) -> size_t {
    auto it = drvs.find(root);
    if (it == drvs.end()) return 0;
    if (auto d = depth.find(it->second.get()); d != depth.end())
      return d->second;
    struct Frame {
      const store::Derivation* drv;
      std::vector<const store::Derivation*> children;
      size_t next = 0;
      size_t best = 0;
    };
    auto frameOf = [&](const store::Derivation* d) {
      Frame f{d, {}, 0, 0};
      for (auto& [in, outs] : d->inputDrvs)
        if (auto c = drvs.find(dir.printPath(in)); c != drvs.end())
          f.children.push_back(c->second.get());
      return f;
    };
    std::vector<Frame> stack{frameOf(it->second.get())};
    depth.emplace(it->second.get(), 0);  // placeholder: cuts cycles
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next < f.children.size()) {
        const store::Derivation* c = f.children[f.next++];
        if (auto d = depth.find(c); d != depth.end()) {
          f.best = std::max(f.best, d->second + 1);
          continue;
        }
        depth.emplace(c, 0);
        stack.push_back(frameOf(c));  // may invalidate `f`
        continue;
      }
      size_t mine = f.best;
      depth[f.drv] = mine;
      stack.pop_back();
      if (!stack.empty())
        stack.back().best = std::max(stack.back().best, mine + 1);
    }
    return depth.at(it->second.get());
  };
  std::vector<std::pair<size_t, size_t>> keyed;  // depth, original index
  keyed.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i)
    keyed.emplace_back(jobs[i].error.empty() ? depthOf(jobs[i].drvPath) : 0, i);
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](auto& a, auto& b) { return a.first < b.first; });
  std::vector<Job> out;
  out.reserve(jobs.size());
  for (auto& [d, i] : keyed) out.push_back(std::move(jobs[i]));
  jobs = std::move(out);
}

}  // namespace kiln::scheduler
