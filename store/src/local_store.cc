// LocalStore: opening, queries and registration. Adds are in
// local_store_add.cc, roots/GC/verify in local_store_gc.cc.
#include <unistd.h>

#include <chrono>
#include <sstream>

#include "kiln/common/file.h"
#include "kiln/store/store_db.h"
#include "local_store_impl.h"

namespace kiln::store {

LocalStore::Impl::Impl(const std::string& state, const StoreDir& sd)
    : storeDir(sd),
      stateDir(absPath(state)),
      physicalRoot(stateDir + "/store"),
      gcRootsDir(stateDir + "/gcroots"),
      tempRootsDir(stateDir + "/temproots"),
      locksDir(stateDir + "/locks"),
      gcLockPath(stateDir + "/gc.lock") {
  for (auto& d : {physicalRoot, gcRootsDir, tempRootsDir, locksDir,
                  stateDir + "/db"})
    createDirs(d);
  *db.lock() = openStoreDb(stateDir + "/db/db.sqlite", storeDir.dir());
}

LocalStore::LocalStore(const std::string& stateDir, const StoreDir& storeDir)
    : impl_(std::make_unique<Impl>(stateDir, storeDir)) {}

LocalStore::~LocalStore() {
  auto tr = impl_->tempRoots.lock();
  if (tr->file) tr->file->unlinkOnRelease();
}

const StoreDir& LocalStore::storeDir() const { return impl_->storeDir; }
const std::string& LocalStore::stateDir() const { return impl_->stateDir; }
const std::string& LocalStore::physicalRoot() const {
  return impl_->physicalRoot;
}

std::string LocalStore::physicalPath(const StorePath& path) const {
  return impl_->physicalRoot + "/" + path.baseName();
}

std::string LocalStore::printPath(const StorePath& path) const {
  return impl_->storeDir.printPath(path);
}

StorePath LocalStore::parsePath(std::string_view full) const {
  return impl_->storeDir.toStorePath(full);
}

// ------------------------------------------------------------- database

namespace {

std::string joinSigs(const std::set<std::string>& sigs) {
  std::string out;
  for (auto& s : sigs) out += (out.empty() ? "" : " ") + s;
  return out;
}

std::set<std::string> splitSigs(const std::string& s) {
  std::set<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.insert(w);
  return out;
}

}  // namespace

SqliteStmt& LocalStore::Impl::statement(SqliteDb& d, const std::string& sql) {
  auto& slot = statements[sql];
  if (!slot) slot = std::make_unique<SqliteStmt>(d.prepare(sql));
  slot->reset();
  return *slot;
}

std::optional<int64_t> LocalStore::Impl::pathId(SqliteDb& d,
                                                const StorePath& path) {
  auto& st = statement(d, "select id from ValidPaths where path = ?");
  st.bind(storeDir.printPath(path));
  std::optional<int64_t> id;
  if (st.step()) id = st.getInt(0);
  st.reset();  // an open select would pin the connection's read snapshot
  return id;
}

std::optional<ValidPathInfo> LocalStore::Impl::readInfo(SqliteDb& d,
                                                        const StorePath& path) {
  auto st = d.prepare(
      "select id, hash, registrationTime, deriver, narSize, ultimate, sigs, "
      "ca from ValidPaths where path = ?");
  st.bind(storeDir.printPath(path));
  if (!st.step()) return std::nullopt;
  ValidPathInfo info(path);
  int64_t id = st.getInt(0);
  info.narHash = Hash::parse(st.getStr(1));
  info.registrationTime = st.getInt(2);
  if (!st.isNull(3) && !st.getStr(3).empty())
    info.deriver = storeDir.parsePath(st.getStr(3));
  info.narSize = static_cast<uint64_t>(st.getInt(4));
  info.ultimate = st.getInt(5) != 0;
  info.sigs = splitSigs(st.getStr(6));
  info.ca = st.getStr(7);
  auto refs = d.prepare(
      "select p.path from Refs r join ValidPaths p on p.id = r.reference "
      "where r.referrer = ?");
  refs.bind(id);
  while (refs.step()) info.references.insert(storeDir.parsePath(refs.getStr(0)));
  return info;
}

int64_t LocalStore::Impl::insertValidPath(SqliteDb& d,
                                          const ValidPathInfo& info) {
  auto& st = statement(
      d,
      "insert into ValidPaths (path, hash, registrationTime, deriver, "
      "narSize, ultimate, sigs, ca) values (?, ?, ?, ?, ?, ?, ?, ?)");
  st.bind(storeDir.printPath(info.path))
      .bind("sha256:" + info.narHash.toHex())
      .bind(info.registrationTime ? info.registrationTime
                                  : clock->nowMs() / 1000);
  if (info.deriver)
    st.bind(storeDir.printPath(*info.deriver));
  else
    st.bindNull();
  st.bind(static_cast<int64_t>(info.narSize));
  if (info.ultimate)
    st.bind(int64_t{1});
  else
    st.bindNull();
  if (info.sigs.empty())
    st.bindNull();
  else
    st.bind(joinSigs(info.sigs));
  if (info.ca.empty())
    st.bindNull();
  else
    st.bind(info.ca);
  st.exec();
  int64_t id = d.lastInsertRowId();
  for (auto& ref : info.references) {
    auto refId = ref == info.path ? std::optional(id) : pathId(d, ref);
    if (!refId)
      throw InvalidPathError("cannot add '" + storeDir.printPath(info.path) +
                             "': its reference '" + storeDir.printPath(ref) +
                             "' is not valid");
    statement(d, "insert into Refs (referrer, reference) values (?, ?)")
        .bind(id)
        .bind(*refId)
        .exec();
  }
  return id;
}

void LocalStore::Impl::insertDerivationOutputs(
    SqliteDb& d, int64_t drvId,
    const std::map<std::string, StorePath>& outputs) {
  auto& st = statement(d,
                       "insert or replace into DerivationOutputs (drv, id, "
                       "path) values (?, ?, ?)");
  for (auto& [name, path] : outputs)
    st.bind(drvId).bind(name).bind(storeDir.printPath(path)).exec();
}

void LocalStore::Impl::invalidatePath(SqliteDb& d, const StorePath& path) {
  d.prepare("delete from ValidPaths where path = ?")
      .bind(storeDir.printPath(path))
      .exec();
}

// -------------------------------------------------------------- queries

bool LocalStore::isValid(const StorePath& path) {
  auto lk = impl_->db.lock();
  return impl_->pathId(**lk, path).has_value();
}

std::optional<ValidPathInfo> LocalStore::queryPathInfo(const StorePath& path) {
  auto lk = impl_->db.lock();
  return impl_->readInfo(**lk, path);
}

ValidPathInfo LocalStore::requirePathInfo(const StorePath& path) {
  auto info = queryPathInfo(path);
  if (!info)
    throw InvalidPathError("path '" + printPath(path) + "' is not valid");
  return *info;
}

std::optional<StorePath> LocalStore::queryPathFromHashPart(
    std::string_view hashPart) {
  // A base name with this hash part is valid only if the hash part is.
  try {
    if (hashPart.size() != StorePath::kHashLen) throw FormatError("length");
    StorePath probe(std::string(hashPart) + "-x");
  } catch (const FormatError&) {
    throw FormatError("'" + std::string(hashPart) +
                      "' is not a store path hash part (32 nix32 characters)");
  }
  auto prefix = impl_->storeDir.dir() + "/" + std::string(hashPart) + "-";
  auto lk = impl_->db.lock();
  // `path` is unique, hence indexed: one probe of the index.
  auto& st = impl_->statement(
      **lk, "select path from ValidPaths where path >= ? limit 1");
  st.bind(prefix);
  std::optional<StorePath> out;
  if (st.step() && st.getStr(0).starts_with(prefix))
    out = impl_->storeDir.parsePath(st.getStr(0));
  st.reset();
  return out;
}

StorePathSet LocalStore::queryReferences(const StorePath& path) {
  return requirePathInfo(path).references;
}

StorePathSet LocalStore::queryReferrers(const StorePath& path) {
  auto lk = impl_->db.lock();
  SqliteDb& d = **lk;
  auto st = d.prepare(
      "select p.path from Refs r join ValidPaths p on p.id = r.referrer "
      "where r.reference = (select id from ValidPaths where path = ?)");
  st.bind(printPath(path));
  StorePathSet out;
  while (st.step()) out.insert(impl_->storeDir.parsePath(st.getStr(0)));
  return out;
}

StorePathSet LocalStore::queryRequisites(const StorePathSet& paths) {
  StorePathSet seen;
  std::vector<StorePath> todo(paths.begin(), paths.end());
  while (!todo.empty()) {
    auto p = todo.back();
    todo.pop_back();
    if (!seen.insert(p).second) continue;
    for (auto& r : queryReferences(p))
      if (!seen.count(r)) todo.push_back(r);
  }
  return seen;
}

std::map<std::string, StorePath> LocalStore::queryDerivationOutputs(
    const StorePath& drv) {
  auto lk = impl_->db.lock();
  SqliteDb& d = **lk;
  auto id = impl_->pathId(d, drv);
  if (!id) throw InvalidPathError("path '" + printPath(drv) + "' is not valid");
  auto st = d.prepare("select id, path from DerivationOutputs where drv = ?");
  st.bind(*id);
  std::map<std::string, StorePath> out;
  while (st.step())
    out.emplace(st.getStr(0), impl_->storeDir.parsePath(st.getStr(1)));
  return out;
}

StorePathSet LocalStore::queryAllValidPaths() {
  auto lk = impl_->db.lock();
  auto st = (*lk)->prepare("select path from ValidPaths");
  StorePathSet out;
  while (st.step()) out.insert(impl_->storeDir.parsePath(st.getStr(0)));
  return out;
}

std::vector<LocalStore::BuiltPath> LocalStore::queryBuiltPathsAfter(
    int64_t afterId, size_t limit) {
  auto lk = impl_->db.lock();
  // The primary key's range: only rows past `afterId` are read.
  auto& st = impl_->statement(
      **lk,
      "select id, path from ValidPaths where id > ? and deriver is not null "
      "and deriver != '' order by id limit ?");
  st.bind(afterId);
  st.bind(static_cast<int64_t>(limit));
  std::vector<BuiltPath> out;
  while (st.step())
    out.push_back({st.getInt(0), impl_->storeDir.parsePath(st.getStr(1))});
  st.reset();
  return out;
}

uint64_t LocalStore::countBuiltPathsAfter(int64_t afterId) {
  auto lk = impl_->db.lock();
  auto& st = impl_->statement(
      **lk,
      "select count(*) from ValidPaths where id > ? and deriver is not null "
      "and deriver != ''");
  st.bind(afterId);
  uint64_t n = st.step() ? static_cast<uint64_t>(st.getInt(0)) : 0;
  st.reset();
  return n;
}

LocalStore::Summary LocalStore::summary() {
  auto lk = impl_->db.lock();
  auto st = (*lk)->prepare("select count(*), sum(narSize) from ValidPaths");
  Summary s;
  if (st.step()) {
    s.paths = static_cast<uint64_t>(st.getInt(0));
    s.narBytes = static_cast<uint64_t>(st.getInt(1));
  }
  return s;
}

void LocalStore::registerDerivationOutputs(
    const StorePath& drv, const std::map<std::string, StorePath>& outputs) {
  auto lk = impl_->db.lock();
  SqliteDb& d = **lk;
  retrySqlite([&] {
    SqliteTxn txn(d);
    auto id = impl_->pathId(d, drv);
    if (!id)
      throw InvalidPathError("cannot register outputs of '" + printPath(drv) +
                             "': it is not valid");
    impl_->insertDerivationOutputs(d, *id, outputs);
    txn.commit();
  });
}

}  // namespace kiln::store
