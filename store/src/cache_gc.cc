// Closure-aware garbage collection of a binary cache (cache_gc.h).
#include "kiln/store/cache_gc.h"

#include <charconv>
#include <sstream>

#include "kiln/common/error.h"
#include "kiln/store/gc_plan.h"

namespace kiln::store {

namespace {

constexpr size_t kMaxPendingLines = 10'000'000;

bool isNarInfoKey(const std::string& key) {
  return key.size() == StorePath::kHashLen + 8 && key.ends_with(".narinfo") &&
         key.find('/') == std::string::npos;
}

bool isListingKey(const std::string& key) {
  return key.size() == StorePath::kHashLen + 3 && key.ends_with(".ls") &&
         key.find('/') == std::string::npos;
}

/// The References and URL lines of a narinfo that does not parse: every
/// reference that is a valid base name, and the URL if it is a safe key.
void readLeniently(const std::string& text, CacheSnapshot& into) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("References:")) {
      std::istringstream refs(line.substr(11));
      std::string ref;
      while (refs >> ref) {
        try {
          into.malformedReferences.insert(StorePath(ref));
        } catch (const Error&) {
        }
      }
    } else if (line.starts_with("URL:")) {
      auto url = line.substr(4);
      url.erase(0, url.find_first_not_of(' '));
      into.malformedUrls.insert(url);
    }
  }
}

/// Parses `kiln-gc/pending-nars`; lines that do not parse are dropped
/// (the NAR then waits one more grace period).
std::map<std::string, int64_t> parsePending(const std::string& text) {
  std::map<std::string, int64_t> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line) && out.size() < kMaxPendingLines) {
    auto space = line.find(' ');
    if (space == std::string::npos) continue;
    int64_t since = 0;
    auto [end, ec] = std::from_chars(line.data(), line.data() + space, since);
    if (ec != std::errc() || end != line.data() + space) continue;
    out.emplace(line.substr(space + 1), since);
  }
  return out;
}

void readNarInfo(CacheStorage& storage, const StoreDir& dir,
                 const CacheObject& o, CacheSnapshot& snap) {
  auto text = storage.get(o.key);
  if (!text) return;  // deleted since the listing
  try {
    auto info = NarInfo::parse(dir, *text, o.key);
    if (narInfoFileName(info.path) != o.key)
      throw FormatError("its StorePath " + dir.printPath(info.path) +
                        " does not match the file name");
    StorePath path = info.path;  // info is moved below
    snap.narinfos.emplace(std::move(path),
                          std::make_pair(std::move(info), o.size));
  } catch (const FormatError& e) {
    snap.malformed.emplace(o.key, e.what());
    readLeniently(*text, snap);
  }
}

}  // namespace

CacheSnapshot readCacheSnapshot(CacheStorage& storage,
                                const CacheGcLimits& limits) {
  CacheSnapshot snap;
  auto info = storage.get("nix-cache-info");
  if (!info)
    throw Error(storage.uri() +
                " is not a binary cache: it has no nix-cache-info");
  snap.storeDir =
      CacheInfo::parse(*info, storage.uri() + "/nix-cache-info").storeDir;
  StoreDir dir(snap.storeDir);
  auto objects = storage.listObjects("", limits.maxObjects);
  if (objects.size() >= limits.maxObjects)
    throw Error("the cache " + storage.uri() + " holds more than " +
                std::to_string(limits.maxObjects) +
                " files; refusing to collect only part of it");
  for (auto& o : objects) {
    if (isNarInfoKey(o.key))
      readNarInfo(storage, dir, o, snap);
    else if (isListingKey(o.key))
      snap.listings.emplace(o.key, o.size);
    else if (o.key.starts_with("nar/"))
      snap.nars.emplace(o.key, o.size);
  }
  if (auto pending = storage.get(kPendingNarsKey))
    snap.pendingSince = parsePending(*pending);
  return snap;
}

CacheGcPlan planCacheGc(const CacheSnapshot& cache, const StorePathSet& roots,
                        int64_t nowSec, std::chrono::seconds grace) {
  CacheGcPlan plan;
  ReferenceGraph graph;
  for (auto& [path, entry] : cache.narinfos)
    graph.emplace(path, entry.first.references);
  StorePathSet allRoots = roots;
  allRoots.insert(cache.malformedReferences.begin(),
                  cache.malformedReferences.end());
  for (auto& r : roots)
    if (!graph.count(r)) plan.missingRoots.insert(r);

  std::set<std::string> named = cache.malformedUrls;
  auto dead = planGarbage(graph, allRoots);
  StorePathSet deadSet(dead.begin(), dead.end());
  for (auto& path : dead) {
    auto& [info, size] = cache.narinfos.at(path);
    auto key = narInfoFileName(path);
    plan.narinfos.push_back({key, size, path.baseName()});
    auto ls = key.substr(0, StorePath::kHashLen) + ".ls";
    if (auto it = cache.listings.find(ls); it != cache.listings.end())
      plan.narinfos.push_back({ls, it->second, path.baseName()});
  }
  for (auto& [path, entry] : cache.narinfos)
    if (!deadSet.count(path)) named.insert(entry.first.url);
  plan.keptNarinfos = cache.narinfos.size() - dead.size();

  for (auto& [key, size] : cache.nars) {
    if (named.count(key)) {
      ++plan.keptNars;
      continue;
    }
    auto it = cache.pendingSince.find(key);
    int64_t since = it == cache.pendingSince.end() ? nowSec : it->second;
    if (nowSec - since >= grace.count()) {
      plan.nars.push_back({key, size, ""});
    } else {
      plan.narsWaiting.push_back({key, size, ""});
      plan.pendingSince.emplace(key, since);
    }
  }
  return plan;
}

void applyCacheGc(CacheStorage& storage, const CacheGcPlan& plan) {
  for (auto& item : plan.narinfos) storage.remove(item.key);
  std::string pending;
  for (auto& [key, since] : plan.pendingSince)
    pending += std::to_string(since) + " " + key + "\n";
  storage.put(kPendingNarsKey, pending);
  for (auto& item : plan.nars) storage.remove(item.key);
}

}  // namespace kiln::store
