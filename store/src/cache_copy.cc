#include "kiln/store/cache_copy.h"

#include <functional>
#include <map>
#include <set>
#include <vector>

#include "kiln/store/nar.h"

namespace kiln::store {
namespace {

/// Orders `refs`' keys so that every path comes after the paths it refers
/// to (self-references ignored). `refs` holds exactly the paths to order.
std::vector<StorePath> referencesFirst(
    const std::map<StorePath, StorePathSet>& refs) {
  std::vector<StorePath> order;
  std::set<StorePath> done, visiting;
  std::function<void(const StorePath&)> visit = [&](const StorePath& p) {
    if (done.count(p)) return;
    if (!visiting.insert(p).second)
      throw Error("reference cycle through '" + p.baseName() + "'");
    for (auto& r : refs.at(p))
      if (r != p && refs.count(r)) visit(r);
    visiting.erase(p);
    done.insert(p);
    order.push_back(p);
  };
  for (auto& [p, _] : refs) visit(p);
  return order;
}

/// Copies the metadata a narinfo and a store registration share.
template <typename From, typename To>
void copyPathMeta(const From& from, To& to) {
  to.narHash = from.narHash;
  to.narSize = from.narSize;
  to.references = from.references;
  to.deriver = from.deriver;
  to.sigs = from.sigs;
  to.ca = from.ca;
}

// Publishes `info`'s path (valid in `store`) through `writer`.
void publishPath(LocalStore& store, BinaryCacheWriter& writer,
                 const ValidPathInfo& info) {
  NarInfo meta;
  meta.path = info.path;
  copyPathMeta(info, meta);
  auto physical = store.physicalPath(info.path);
  writer.addPath(meta, [&](Sink& sink) { dumpPath(physical, sink); });
}

}  // namespace

CopyResult copyClosureToCache(LocalStore& store, BinaryCacheWriter& writer,
                              const StorePathSet& paths) {
  writer.init();
  std::map<StorePath, StorePathSet> refs;
  std::map<StorePath, ValidPathInfo> infos;
  for (auto& p : store.queryRequisites(paths)) {
    auto info = store.requirePathInfo(p);
    refs[p] = info.references;
    infos.emplace(p, std::move(info));
  }
  CopyResult result;
  for (auto& p : referencesFirst(refs)) {
    if (writer.hasPath(p)) {
      ++result.alreadyPresent;
      continue;
    }
    publishPath(store, writer, infos.at(p));
    result.copied.push_back(p);
  }
  return result;
}

CopyResult copyClosureToCache(LocalStore& store, BinaryCacheWriter& writer,
                              const StorePathSet& paths, StorePathSet& known) {
  // Walked from the roots, stopping at paths the cache has: a narinfo in
  // the cache means its closure is there (every writer publishes
  // references first), so a new output costs what is new in its closure.
  std::map<StorePath, StorePathSet> refs;
  std::map<StorePath, ValidPathInfo> infos;
  std::vector<StorePath> todo(paths.begin(), paths.end());
  std::set<StorePath> seen;
  CopyResult result;
  while (!todo.empty()) {
    auto p = todo.back();
    todo.pop_back();
    if (!seen.insert(p).second) continue;
    if (known.count(p)) {
      ++result.alreadyPresent;
      continue;
    }
    store.addTempRoot(p);
    auto info = store.requirePathInfo(p);
    if (writer.hasPath(p)) {
      known.insert(p);
      ++result.alreadyPresent;
      continue;
    }
    for (auto& r : info.references)
      if (r != p) todo.push_back(r);
    refs[p] = info.references;
    infos.emplace(p, std::move(info));
  }
  for (auto& p : referencesFirst(refs)) {
    publishPath(store, writer, infos.at(p));
    known.insert(p);
    result.copied.push_back(p);
  }
  return result;
}

CopyResult copyClosureFromCache(BinaryCacheReader& reader, LocalStore& store,
                                const StorePathSet& paths,
                                const ImportOptions& options) {
  reader.init();
  CopyResult result;
  std::map<StorePath, NarInfo> infos;
  std::map<StorePath, StorePathSet> refs;
  std::vector<StorePath> queue(paths.begin(), paths.end());
  std::set<StorePath> seen(paths.begin(), paths.end());
  while (!queue.empty()) {
    auto p = queue.back();
    queue.pop_back();
    if (store.isValid(p)) {
      ++result.alreadyPresent;
      continue;
    }
    auto ni = reader.queryNarInfo(p);
    if (!ni)
      throw CachePathNotFound("binary cache '" + reader.storage().uri() +
                              "' does not have '" + store.printPath(p) + "'");
    for (auto& r : ni->references)
      if (seen.insert(r).second) queue.push_back(r);
    refs[p] = ni->references;
    infos.emplace(p, std::move(*ni));
  }
  auto order = referencesFirst(refs);
  for (auto& p : order) reader.checkTrusted(infos.at(p), options.trust);
  // One batch: nothing is registered unless every NAR was complete and
  // verified, and each NAR is read exactly once (what is checked is what
  // is registered).
  LocalStore::Batch batch(store, order.size() > 1
                                     ? LocalStore::Batch::Sync::kFileSystem
                                     : LocalStore::Batch::Sync::kEachFile);
  for (auto& p : order) {
    auto& ni = infos.at(p);
    ValidPathInfo info(p);
    copyPathMeta(ni, info);
    batch.addFromNar(info, *reader.narSource(ni));
    result.copied.push_back(p);
  }
  batch.commit();
  return result;
}

}  // namespace kiln::store
