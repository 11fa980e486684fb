// The compress-once cache of the central store's NARs (binary_cache.h).
// It is a `file://` cache written by the store's BinaryCacheWriter; this
// file decides when to write into it, what to serve and what to prune.
#include "kiln/web/binary_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>
#include <vector>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/logging.h"
#include "kiln/store/binary_cache.h"
#include "kiln/store/compression.h"
#include "kiln/store/local_store.h"
#include "kiln/store/nar.h"

namespace kiln::web {
namespace {

using store::NarInfo;
using store::ValidPathInfo;

// Whether the kept narinfo `ni` describes the NAR `info` now registers.
bool describes(const NarInfo& ni, const ValidPathInfo& info) {
  return ni.narHash == info.narHash && ni.narSize == info.narSize &&
         ni.references == info.references;
}

// The names in directory `dir` (none when it does not exist).
std::vector<std::string> listDir(const std::string& dir) {
  std::vector<std::string> out;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) {
    if (errno == ENOENT) return out;
    throwSysError("listing '" + dir + "'");
  }
  while (auto* e = ::readdir(d.get())) {
    std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(name);
  }
  return out;
}

// The modification time of `path` in Unix milliseconds, or nullopt.
std::optional<int64_t> mtimeMs(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  return int64_t(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
}

// Sets the modification time of `path` to `ms` (Unix milliseconds).
void touch(const std::string& path, int64_t ms) {
  timespec ts[2];
  ts[0].tv_sec = ts[1].tv_sec = ms / 1000;
  ts[0].tv_nsec = ts[1].tv_nsec = (ms % 1000) * 1000000;
  ::utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW);
}

// Throws FormatError unless `hashPart` is 32 nix32 characters.
void checkHashPart(std::string_view hashPart) {
  try {
    if (hashPart.size() != store::StorePath::kHashLen)
      throw FormatError("length");
    store::StorePath probe(std::string(hashPart) + "-x");
  } catch (const FormatError&) {
    throw FormatError("'" + std::string(hashPart) +
                      "' is not a store path hash part (32 nix32 characters)");
  }
}

// Throws FormatError unless `fileName` is `<52 nix32 characters><ext>` for
// one of `exts`.
void checkNarFileName(std::string_view fileName,
                      const std::vector<std::string>& exts) {
  auto bad = [&](const std::string& why) {
    return FormatError("'" + std::string(fileName) + "' " + why);
  };
  std::string_view hash;
  for (auto& ext : exts)
    if (fileName.ends_with(ext))
      hash = fileName.substr(0, fileName.size() - ext.size());
  if (hash.empty())
    throw bad("is not a NAR file of this cache (<file hash>" + exts.front() +
              ")");
  if (hash.size() != 52) throw bad("does not start with a 52-character hash");
  try {
    Hash::parseBare(hash, HashAlgo::kSha256);
  } catch (const FormatError&) {
    throw bad("does not start with a nix32 sha256 hash");
  }
}

}  // namespace

BinaryCache::BinaryCache(BinaryCacheConfig config)
    : config_(std::move(config)),
      clock_(config_.clock ? *config_.clock : RealClock::instance()) {
  store::checkCompression(config_.compression);
  if (config_.remote) return;  // nothing local to keep or prune
  if (config_.cacheDir.empty())
    config_.cacheDir =
        config_.stateDir + "/binary-cache/" + config_.compression;
  if (config_.pruneInterval.count() > 0)
    pruner_ = std::thread([this] { pruneLoop(); });
}

BinaryCache::~BinaryCache() {
  {
    std::lock_guard lk(stopMu_);
    stop_ = true;
  }
  stopCv_.notify_all();
  if (pruner_.joinable()) pruner_.join();
}

std::string BinaryCache::cacheInfo() const {
  store::CacheInfo ci;
  ci.storeDir = config_.storeDir;
  ci.wantMassQuery = ci.hasWantMassQuery = true;
  ci.priority = config_.priority;
  ci.hasPriority = true;
  return ci.render();
}

std::shared_ptr<store::LocalStore> BinaryCache::store() {
  std::lock_guard lk(storeMu_);
  // Only a store the scheduler made: a request creates nothing.
  if (!store_ && pathExists(config_.stateDir + "/db/db.sqlite"))
    store_ = std::make_shared<store::LocalStore>(
        config_.stateDir, store::StoreDir(config_.storeDir));
  return store_;
}

std::shared_ptr<std::mutex> BinaryCache::pathLock(const std::string& hashPart) {
  std::lock_guard lk(locksMu_);
  auto& weak = pathLocks_[hashPart];
  auto lock = weak.lock();
  if (!lock) weak = lock = std::make_shared<std::mutex>();
  // Forget the locks nobody holds, so the map stays as small as the
  // requests in flight.
  std::erase_if(pathLocks_, [](auto& kv) { return kv.second.expired(); });
  return lock;
}

std::optional<std::string> BinaryCache::narInfo(std::string_view hashPart) {
  if (config_.remote) {
    checkHashPart(hashPart);
    return config_.remote->get(std::string(hashPart) + ".narinfo");
  }
  auto st = store();
  if (!st) return std::nullopt;
  auto path = st->queryPathFromHashPart(hashPart);
  auto info = path ? st->queryPathInfo(*path) : std::nullopt;
  if (!info) return std::nullopt;
  std::shared_lock pruning(pruneMu_);
  NarInfo ni;
  {
    auto lock = pathLock(std::string(hashPart));
    std::lock_guard once(*lock);
    ni = kept(*info);
  }
  store::StoreDir dir(config_.storeDir);
  ni.sigs = info->sigs;
  if (config_.signingKey)
    ni.sigs.insert(config_.signingKey->sign(store::pathFingerprint(
        dir, ni.path, ni.narHash, ni.narSize, ni.references)));
  return ni.render(dir);
}

std::optional<NarInfo> BinaryCache::readKept(const ValidPathInfo& info) {
  store::FileCacheStorage storage(config_.cacheDir);
  store::BinaryCacheReader reader(storage, store::StoreDir(config_.storeDir));
  try {
    auto ni = reader.queryNarInfo(info.path);
    if (ni && describes(*ni, info) && ni->compression == config_.compression &&
        storage.exists(ni->url))
      return ni;
  } catch (const FormatError& e) {
    logWarn("binary cache: rewriting a corrupt kept narinfo: " +
            std::string(e.what()));
  }
  return std::nullopt;
}

NarInfo BinaryCache::kept(const ValidPathInfo& info) {
  if (auto ni = readKept(info)) return *ni;
  return compress(info);
}

NarInfo BinaryCache::compress(const ValidPathInfo& info) {
  // A store object of its own, so that its temporary root on the path
  // (which keeps a collector from deleting it while it is read) ends with
  // this compression.
  store::StoreDir dir(config_.storeDir);
  store::LocalStore st(config_.stateDir, dir);
  st.addTempRoot(info.path);
  auto now = st.queryPathInfo(info.path);
  if (!now || now->narHash != info.narHash)
    throw Error("'" + dir.printPath(info.path) +
                "' changed while its NAR was being compressed");
  store::FileCacheStorage storage(config_.cacheDir);
  store::CacheWriteOptions opts;
  opts.compression = config_.compression;
  opts.compressionLevel = config_.compressionLevel;
  store::BinaryCacheWriter writer(storage, dir, opts);
  NarInfo meta;
  meta.path = info.path;
  meta.narHash = info.narHash;
  meta.narSize = info.narSize;
  meta.references = info.references;
  meta.deriver = info.deriver;
  meta.ca = info.ca;
  auto physical = st.physicalPath(info.path);
  auto ni = writer.addPath(
      meta, [&](Sink& sink) { store::dumpPath(physical, sink); });
  compressions_++;
  return ni;
}

std::string BinaryCache::narFile(std::string_view fileName) const {
  checkNarFileName(fileName,
                   {".nar" + store::compressionExtension(config_.compression)});
  return config_.cacheDir + "/nar/" + std::string(fileName);
}

std::unique_ptr<Source> BinaryCache::openRemoteNar(
    std::string_view fileName) const {
  if (!config_.remote) throw Error("this binary cache has no remote store");
  // Whatever compression the publisher used.
  checkNarFileName(fileName, {".nar", ".nar.xz", ".nar.zst", ".nar.bz2"});
  return config_.remote->open("nar/" + std::string(fileName));
}

size_t BinaryCache::pruneNarInfos(store::LocalStore& st) {
  store::StoreDir dir(config_.storeDir);
  size_t removed = 0;
  for (auto& name : listDir(config_.cacheDir)) {
    if (!name.ends_with(".narinfo")) continue;
    auto file = config_.cacheDir + "/" + name;
    std::optional<NarInfo> ni;
    try {
      ni = NarInfo::parse(dir, readFile(file), file);
    } catch (const Error& e) {
      logWarn("binary cache: removing unreadable " + file + ": " + e.what());
    }
    if (ni) {
      auto info = st.queryPathInfo(ni->path);
      if (info && describes(*ni, *info)) continue;
      // Its NAR stays for the grace period from now.
      touch(config_.cacheDir + "/" + ni->url, clock_.nowMs());
    }
    if (::unlink(file.c_str()) != 0 && errno != ENOENT)
      throwSysError("removing '" + file + "'");
    removed++;
  }
  return removed;
}

PruneResult BinaryCache::prune() {
  PruneResult r;
  if (config_.remote) return r;  // the object store's lifecycle, not ours
  auto st = store();
  if (!st) return r;
  std::unique_lock lk(pruneMu_);
  r.narInfos = pruneNarInfos(*st);
  std::set<std::string> named;
  store::StoreDir dir(config_.storeDir);
  for (auto& name : listDir(config_.cacheDir))
    if (name.ends_with(".narinfo"))
      named.insert(baseNameOf(
          NarInfo::parse(dir, readFile(config_.cacheDir + "/" + name), name)
              .url));
  int64_t cutoff =
      clock_.nowMs() -
      std::chrono::duration_cast<std::chrono::milliseconds>(config_.pruneGrace)
          .count();
  auto sweep = [&](const std::string& folder, auto keep, size_t& count) {
    for (auto& name : listDir(folder)) {
      auto file = folder + "/" + name;
      auto m = mtimeMs(file);
      if (keep(name) || !m || *m > cutoff) continue;
      if (::unlink(file.c_str()) == 0) count++;
    }
  };
  sweep(
      config_.cacheDir + "/nar",
      [&](const std::string& n) { return named.count(n) > 0; }, r.nars);
  sweep(
      config_.cacheDir,
      [](const std::string& n) { return !n.starts_with(".kiln-upload-"); },
      r.temporaries);
  return r;
}

void BinaryCache::pruneLoop() {
  std::unique_lock lk(stopMu_);
  while (!clock_.waitUntil(stopCv_, lk, clock_.now() + config_.pruneInterval,
                           [&] { return stop_; })) {
    lk.unlock();
    try {
      auto r = prune();
      if (r.narInfos + r.nars + r.temporaries > 0)
        logInfo("binary cache: pruned " + std::to_string(r.narInfos) +
                " narinfos, " + std::to_string(r.nars) + " NARs, " +
                std::to_string(r.temporaries) + " unfinished uploads");
    } catch (const std::exception& e) {
      logWarn(std::string("binary cache: pruning failed: ") + e.what());
    }
    lk.lock();
  }
}

}  // namespace kiln::web
