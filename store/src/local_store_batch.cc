// LocalStore::Batch: many adds made durable, renamed and registered
// together (one syncfs, one directory fsync, one transaction).
#include <fcntl.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <unordered_map>

#include "kiln/common/fail_point.h"
#include "kiln/common/file.h"
#include "kiln/store/derivation.h"
#include "kiln/store/nar.h"
#include "local_store_impl.h"
#include "stream_channel.h"

namespace kiln::store {

struct LocalStore::Batch::State {
  struct Entry {
    ValidPathInfo info;
    std::string temp;  // its temporary tree; empty once renamed or deleted
    std::optional<std::map<std::string, StorePath>> outputs;
  };
  Sync sync;
  bool single = false;  // made as Sync::kEachFile (fail point names)
  std::vector<Entry> entries;
  // Outputs of `.drv`s valid before this batch, registered with its commit.
  std::vector<std::pair<StorePath, std::map<std::string, StorePath>>>
      validDrvOutputs;
  std::unordered_map<std::string, size_t> index;  // base name → entry
  // H of the `.drv`s checked or loaded by this batch (created on first
  // use; inputs are loaded from the queue or the store at most once).
  std::optional<DrvHashCache> drvHashes;
  // A cache whose checked `.drv`s need no second check (see trustHashes).
  const DrvHashCache* trusted = nullptr;
  // Where checked `.drv`s go (keepCheckedDerivations), if anywhere.
  std::function<void(const StorePath&, Derivation&&)> checkedSink;

  // Checks the `.drv` `info.path` whose file holds `contents`: its outputs
  // must be those its contents imply (checkDerivationFile).
  // With `madeHere` (addText: the path was computed from `contents`), a
  // `.drv` the trusted cache made is taken as it is.
  void checkDrv(LocalStore& store, const ValidPathInfo& info,
                std::string_view contents, bool madeHere);
  // The `.drv` at `path`, queued here or valid in the store.
  Derivation loadDrv(LocalStore& store, const StorePath& path);

  // Exclusive locks of the stripes of every queued path.
  std::vector<FileLock> lockStripes(Impl& impl) const;
  // Whether each queued path is valid now (one read transaction).
  std::vector<bool> validNow(Impl& impl) const;
  // Renames the queued paths not `valid` into place, fsyncs the store
  // directory and registers them in one transaction; on failure removes
  // what it renamed and rethrows.
  void placeAndRegister(LocalStore& store, const std::vector<bool>& valid);
  // Writes the rows of the fresh paths and of validDrvOutputs (inside the
  // caller's transaction).
  void insertRows(Impl& impl, SqliteDb& d, const std::vector<Entry*>& fresh);
  // The fail point named `store.<add|batch>.<what>` for this batch.
  void failPoint(std::string_view what) const;
  // Forgets every queued path and deletes the temporaries still present.
  void clear() noexcept {
    for (auto& e : entries)
      if (!e.temp.empty()) PathGuard discard(e.temp);
    entries.clear();
    index.clear();
    validDrvOutputs.clear();
  }
};

namespace {

// Renames temporary `temp` to `final`, first removing a leftover there of
// an add that died between rename and registration (the caller holds the
// path's stripe, so nobody else is placing it).
void placeTemp(const std::string& temp, const std::string& final) {
  if (::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, final.c_str(),
                  RENAME_NOREPLACE) == 0)
    return;
  if (errno != EEXIST)
    throwSysError("renaming '" + temp + "' to '" + final + "'");
  deletePath(final);
  if (::rename(temp.c_str(), final.c_str()) != 0)
    throwSysError("renaming '" + temp + "' to '" + final + "'");
}

}  // namespace

Derivation LocalStore::Batch::State::loadDrv(LocalStore& store,
                                             const StorePath& path) {
  const auto& sd = store.storeDir();
  if (auto it = index.find(path.baseName()); it != index.end())
    return readDerivationFile(sd, entries[it->second].temp);
  if (!store.isValid(path))
    throw InvalidPathError("input derivation '" + sd.printPath(path) +
                           "' is not valid");
  return readDerivationFile(sd, store.physicalPath(path));
}

void LocalStore::Batch::State::checkDrv(LocalStore& store,
                                        const ValidPathInfo& info,
                                        std::string_view contents,
                                        bool madeHere) {
  if (madeHere && trusted && trusted->outputsChecked(info.path.baseName()))
    return;
  if (!drvHashes)
    drvHashes.emplace(store.storeDir(), [this, &store](const StorePath& p) {
      return loadDrv(store, p);
    });
  Derivation drv =
      checkDerivationFile(*drvHashes, info.path, contents, info.references);
  if (checkedSink) checkedSink(info.path, std::move(drv));
}

LocalStore::Batch::Batch(LocalStore& store, Sync sync)
    : store_(store), state_(std::make_unique<State>()) {
  state_->single = sync == Sync::kEachFile;
  state_->sync = store.contentSync() == ContentSync::kNone ? Sync::kNone : sync;
}

LocalStore::Batch::~Batch() { state_->clear(); }

bool LocalStore::Batch::queued(const StorePath& path) const {
  return state_->index.count(path.baseName()) != 0;
}

size_t LocalStore::Batch::size() const { return state_->entries.size(); }

void LocalStore::Batch::addFromNar(const ValidPathInfo& info, Source& nar) {
  add(info, &nar, "", false);
}

void LocalStore::Batch::addVerifiedNar(const ValidPathInfo& info, Source& nar) {
  add(info, &nar, "", true, /*hashed=*/true);
}

void LocalStore::Batch::adoptTree(const ValidPathInfo& info,
                                  const std::string& tree) {
  // First under a temporary name of our own: the tree may be at the
  // path's physical location, which only an adder holding the path's
  // stripe may touch (placeTemp).
  std::string own = store_.impl_->tempPathFor(info.path);
  if (::rename(tree.c_str(), own.c_str()) != 0) {
    int err = errno;
    PathGuard discard(tree);
    throw SysError("moving '" + tree + "' into the store" +
                       (err == EXDEV ? " (it is on another file system)" : ""),
                   err);
  }
  PathGuard guard(own);
  if (add(info, nullptr, own, false)) guard.dismiss();
}

bool LocalStore::Batch::add(const ValidPathInfo& info, Source* nar,
                            const std::string& adopted, bool caComputed,
                            bool hashed) {
  const auto& path = info.path;
  if (info.narHash.algo() != HashAlgo::kSha256)
    throw FormatError("NAR hash of '" + store_.printPath(path) +
                      "' must be sha256");
  auto& impl = *store_.impl_;
  if (queued(path) || impl.knownValid(path)) return false;
  // The root comes first: it keeps a collector off the temporary written
  // below and, once valid, off the path itself.
  store_.addTempRoot(path);
  if (store_.isValid(path)) {
    impl.markValid(path);
    return false;
  }
  for (auto& r : info.references) {
    if (r == path || queued(r) || impl.knownValid(r)) continue;
    store_.addTempRoot(r);
    if (!store_.isValid(r))
      throw InvalidPathError("cannot add '" + store_.printPath(path) +
                             "': its reference '" + store_.printPath(r) +
                             "' is not valid");
    impl.markValid(r);
  }
  std::string drvText;
  Impl::TempChecks checks;
  checks.verifyCa = !caComputed;
  checks.verifyNarHash = !hashed;
  if (path.isDerivation()) checks.fileContents = &drvText;
  bool fsyncEach = state_->sync == Sync::kEachFile;
  std::string temp = adopted;
  if (nar) temp = impl.writeTemp(info, *nar, fsyncEach, checks);
  PathGuard guard(temp);
  if (!nar) impl.checkAdopted(info, temp, fsyncEach, checks);
  if (path.isDerivation()) state_->checkDrv(store_, info, drvText, caComputed);
  state_->entries.push_back({info, temp, std::nullopt});
  guard.dismiss();
  state_->index.emplace(path.baseName(), state_->entries.size() - 1);
  return true;
}

StorePath LocalStore::Batch::addText(std::string_view name,
                                     std::string_view contents,
                                     const StorePathSet& refs) {
  auto hash = hashString(HashAlgo::kSha256, contents);
  ValidPathInfo info(store_.storeDir().makeTextPath(name, hash, refs));
  StringSink nar;
  dumpString(contents, nar);
  info.narHash = hashString(HashAlgo::kSha256, nar.s);
  info.narSize = nar.s.size();
  info.references = refs;
  info.ca = makeTextCa(hash);
  StringSource src(nar.s);
  add(info, &src, "", true);
  return info.path;
}

StorePath LocalStore::Batch::addPath(const std::string& fsPath,
                                     std::string_view name,
                                     const NarPathFilter& filter) {
  std::string src = absPath(fsPath);
  std::string nm = name.empty() ? baseNameOf(src) : std::string(name);
  checkStorePathName(nm);
  HashingSink first(HashAlgo::kSha256);
  dumpPath(src, first, filter);
  auto [hash, size] = first.finish();
  ValidPathInfo info(store_.storeDir().makeSourcePath(nm, hash, {}, false));
  info.narHash = hash;
  info.narSize = size;
  info.ca = makeFixedCa(true, hash);
  if (queued(info.path) || store_.impl_->knownValid(info.path))
    return info.path;
  store_.addTempRoot(info.path);
  if (store_.isValid(info.path)) return info.path;
  // Second pass: the tree is serialised again straight into the restorer;
  // the hash check catches a tree that changed in between.
  StreamChannel chan([&](Sink& sink) { dumpPath(src, sink, filter); });
  try {
    addFromNar(info, chan.source());
  } catch (const HashMismatchError&) {
    throw Error("'" + src + "' changed while it was being added to the store");
  }
  return info.path;
}

void LocalStore::Batch::keepCheckedDerivations(
    std::function<void(const StorePath&, Derivation&&)> sink) {
  state_->checkedSink = std::move(sink);
}

void LocalStore::Batch::trustHashes(const DrvHashCache* cache) {
  state_->trusted = cache;
}

void LocalStore::Batch::registerDerivationOutputs(
    const StorePath& drv, const std::map<std::string, StorePath>& outputs) {
  auto it = state_->index.find(drv.baseName());
  if (it == state_->index.end()) {
    store_.addTempRoot(drv);
    if (!store_.isValid(drv))
      throw InvalidPathError("cannot register outputs of '" +
                             store_.printPath(drv) + "': it is not valid");
    state_->validDrvOutputs.emplace_back(drv, outputs);
    return;
  }
  auto& slot = state_->entries[it->second].outputs;
  if (!slot) slot.emplace();
  for (auto& [name, path] : outputs) slot->insert_or_assign(name, path);
}

std::vector<FileLock> LocalStore::Batch::State::lockStripes(Impl& impl) const {
  std::set<char> stripes;
  for (auto& e : entries) stripes.insert(Impl::stripeOf(e.info.path));
  std::vector<FileLock> locks;  // in ascending order: no deadlock
  for (char s : stripes) locks.push_back(impl.lockStripe(s));
  return locks;
}

std::vector<bool> LocalStore::Batch::State::validNow(Impl& impl) const {
  std::vector<bool> valid(entries.size());
  auto lk = impl.db.lock();
  SqliteTxn read(**lk, false);
  for (size_t i = 0; i < entries.size(); ++i)
    valid[i] = impl.pathId(**lk, entries[i].info.path).has_value();
  read.commit();
  return valid;
}

void LocalStore::Batch::State::failPoint(std::string_view what) const {
  // Names are literals so that docs/operations.md can list every one.
  if (what == "after-rename")
    KILN_FAIL_POINT(single ? "store.add.after-rename"
                           : "store.batch.after-rename");
  else if (what == "before-commit")
    KILN_FAIL_POINT(single ? "store.add.before-commit"
                           : "store.batch.before-commit");
  else
    KILN_FAIL_POINT(single ? "store.add.after-commit"
                           : "store.batch.after-commit");
}

void LocalStore::Batch::State::insertRows(Impl& impl, SqliteDb& d,
                                          const std::vector<Entry*>& fresh) {
  for (auto* e : fresh) {
    int64_t id = impl.insertValidPath(d, e->info);
    if (e->outputs) impl.insertDerivationOutputs(d, id, *e->outputs);
  }
  for (auto& [drv, outputs] : validDrvOutputs) {
    auto id = impl.pathId(d, drv);
    if (!id)  // collected since: it was only temp-rooted by this process
      throw InvalidPathError("cannot register outputs of '" +
                             impl.storeDir.printPath(drv) +
                             "': it is not valid");
    impl.insertDerivationOutputs(d, *id, outputs);
  }
}

void LocalStore::Batch::State::placeAndRegister(
    LocalStore& store, const std::vector<bool>& valid) {
  auto& impl = *store.impl_;
  std::vector<Entry*> fresh;
  std::vector<std::string> placed;  // renamed into place, not registered
  try {
    for (size_t i = 0; i < entries.size(); ++i) {
      if (valid[i]) continue;  // ours is discarded with the temporaries
      auto& e = entries[i];
      std::string final = store.physicalPath(e.info.path);
      placeTemp(e.temp, final);
      e.temp.clear();
      placed.push_back(final);
      fresh.push_back(&e);
    }
    if (fresh.empty() && validDrvOutputs.empty()) return;
    if (!fresh.empty()) {
      if (sync != Sync::kNone) syncDirectory(impl.physicalRoot);
      failPoint("after-rename");
    }
    auto lk = impl.db.lock();
    SqliteDb& d = **lk;
    retrySqlite([&] {
      SqliteTxn txn(d);
      insertRows(impl, d, fresh);
      failPoint("before-commit");
      txn.commit();
    });
  } catch (...) {
    for (auto& p : placed) PathGuard discard(p);
    throw;
  }
  failPoint("after-commit");
}

void LocalStore::Batch::commit() {
  auto& impl = *store_.impl_;
  if (state_->entries.empty() && state_->validDrvOutputs.empty()) return;
  struct Reset {
    State& state;
    ~Reset() { state.clear(); }
  } reset{*state_};
  if (state_->sync == Sync::kFileSystem && !state_->entries.empty())
    syncFileSystem(impl.physicalRoot);
  auto locks = state_->lockStripes(impl);
  // Which are valid already (another adder won)? Nobody can register them
  // from now on: that needs the stripes we hold.
  auto valid = state_->validNow(impl);
  state_->placeAndRegister(store_, valid);
  for (auto& e : state_->entries) impl.markValid(e.info.path);
}

}  // namespace kiln::store
