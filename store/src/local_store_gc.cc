// LocalStore: permanent and temporary GC roots, garbage collection and
// verification.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <sstream>

#include "kiln/common/fail_point.h"
#include "kiln/common/file.h"
#include "kiln/common/logging.h"
#include "kiln/store/gc_plan.h"
#include "kiln/store/nar.h"
#include "local_store_impl.h"

namespace kiln::store {

namespace fs = std::filesystem;

namespace {

std::optional<std::string> readLinkOf(const std::string& path) {
  std::error_code ec;
  auto t = fs::read_symlink(path, ec);
  if (ec) return std::nullopt;
  auto s = t.string();
  if (!s.empty() && s[0] != '/') s = dirNameOf(path) + "/" + s;
  return s;
}

bool isSymlink(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

void checkRootName(const std::string& name) {
  bool bad = name.empty() || name[0] == '/' || name.back() == '/';
  std::istringstream in(name);
  for (std::string part; !bad && std::getline(in, part, '/');)
    bad = part.empty() || part == "." || part == "..";
  if (bad) throw FormatError("invalid GC root name '" + name + "'");
}

// Points `link` at `target` atomically (a temporary link renamed over it).
void replaceSymlink(const std::string& target, const std::string& link) {
  std::string tmp = link + ".tmp-" + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  if (::symlink(target.c_str(), tmp.c_str()) != 0)
    throwSysError("creating symlink '" + tmp + "'");
  if (::rename(tmp.c_str(), link.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throwSysError("renaming '" + tmp + "' to '" + link + "'");
  }
}

}  // namespace

// ------------------------------------------------------------------ roots

std::string LocalStore::addRoot(const std::string& name,
                                const StorePath& path) {
  checkRootName(name);
  addTempRoot(path);  // keeps a concurrent collector off it until linked
  if (!isValid(path))
    throw InvalidPathError("cannot make '" + printPath(path) +
                           "' a GC root: it is not valid");
  std::string link = impl_->gcRootsDir + "/" + name;
  createDirs(dirNameOf(link));
  replaceSymlink(printPath(path), link);
  return link;
}

bool LocalStore::removeRoot(const std::string& name) {
  checkRootName(name);
  std::string link = impl_->gcRootsDir + "/" + name;
  if (!isSymlink(link)) return false;
  if (::unlink(link.c_str()) != 0 && errno != ENOENT)
    throwSysError("removing the GC root '" + link + "'");
  return true;
}

std::string LocalStore::addIndirectRoot(const StorePath& path,
                                        const std::string& link,
                                        bool physicalTarget) {
  std::string abs = absPath(link);
  addTempRoot(path);
  if (!isValid(path))
    throw InvalidPathError("cannot make '" + printPath(path) +
                           "' a GC root: it is not valid");
  struct stat st;
  if (::lstat(abs.c_str(), &st) == 0 && !S_ISLNK(st.st_mode))
    throw Error("cannot create the GC root '" + abs +
                "': it exists and is not a symlink");
  replaceSymlink(physicalTarget ? physicalPath(path) : printPath(path), abs);
  std::string autoLink =
      impl_->gcRootsDir + "/auto/" + hashString(HashAlgo::kSha1, abs).toNix32();
  createDirs(dirNameOf(autoLink));
  replaceSymlink(abs, autoLink);
  return autoLink;
}

std::map<std::string, StorePath> LocalStore::findRoots() {
  std::map<std::string, StorePath> out;
  std::error_code ec;
  auto storePrefix = impl_->storeDir.dir() + "/";
  auto physPrefix = impl_->physicalRoot + "/";
  for (auto it = fs::recursive_directory_iterator(impl_->gcRootsDir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::string link = it->path().string();
    if (!isSymlink(link)) continue;
    // Follow a chain of links (indirect roots) to a store path.
    auto target = readLinkOf(link);
    for (int hops = 0; target && hops < 10; ++hops) {
      try {
        if (target->starts_with(storePrefix)) {
          out.emplace(link, impl_->storeDir.toStorePath(*target));
          break;
        }
        if (target->starts_with(physPrefix)) {
          auto base = target->substr(physPrefix.size());
          out.emplace(link, StorePath(base.substr(0, base.find('/'))));
          break;
        }
      } catch (const FormatError&) {
        break;  // points into the store but not at a store path
      }
      target = isSymlink(*target) ? readLinkOf(*target) : std::nullopt;
    }
  }
  return out;
}

namespace {

// Reads the temporary roots of live processes; removes files whose owner
// has exited (nobody holds their lock). Caller holds gc.lock exclusively.
StorePathSet readTempRoots(const std::string& dir) {
  StorePathSet roots;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir, ec)) {
    std::string file = e.path().string();
    if (auto stale = FileLock::tryAcquire(file, LockMode::kExclusive)) {
      stale->unlinkOnRelease();
      continue;
    }
    std::string data;
    try {
      data = readFile(file);
    } catch (const SysError&) {
      continue;  // its owner removed it meanwhile
    }
    std::istringstream in(data);
    for (std::string line; std::getline(in, line);) {
      try {
        roots.insert(StorePath(line));
      } catch (const FormatError&) {
        logWarn("ignoring malformed temporary root '" + line + "' in " + file);
      }
    }
  }
  return roots;
}

ReferenceGraph readGraph(SqliteDb& db, const StoreDir& sd) {
  ReferenceGraph graph;
  auto st = db.prepare(
      "select p.path, r.path from ValidPaths p "
      "left join Refs x on x.referrer = p.id "
      "left join ValidPaths r on r.id = x.reference");
  while (st.step()) {
    auto& refs = graph[sd.parsePath(st.getStr(0))];
    if (!st.isNull(1)) refs.insert(sd.parsePath(st.getStr(1)));
  }
  return graph;
}

}  // namespace

// -------------------------------------------------------------------- GC

GcResult LocalStore::collectGarbage(bool dryRun) {
  return runGc(dryRun, nullptr);
}

GcResult LocalStore::previewGarbage(const GcRootChanges& changes) {
  return runGc(true, &changes);
}

GcResult LocalStore::runGc(bool dryRun, const GcRootChanges* changes) {
  auto gcLock = FileLock::acquire(impl_->gcLockPath, LockMode::kExclusive);
  StorePathSet roots = readTempRoots(impl_->tempRootsDir);
  for (auto& [link, path] : findRoots())
    if (!changes || !changes->droppedLinks.count(link)) roots.insert(path);
  if (changes)
    roots.insert(changes->addedRoots.begin(), changes->addedRoots.end());
  ReferenceGraph graph;
  {
    auto lk = impl_->db.lock();
    graph = readGraph(**lk, impl_->storeDir);
  }
  GcResult res;
  for (auto& path : planGarbage(graph, roots)) {
    std::string phys = physicalPath(path);
    res.bytesFreed += treeSize(phys);
    res.deleted.push_back(path);
    if (dryRun) continue;
    // Unregister first: a crash after this leaves only an unregistered
    // tree, which the junk pass of a later run removes.
    {
      auto lk = impl_->db.lock();
      retrySqlite([&] {
        SqliteTxn txn(**lk);
        impl_->invalidatePath(**lk, path);
        txn.commit();
      });
    }
    KILN_FAIL_POINT("store.gc.after-unregister");
    deletePath(phys);
    KILN_FAIL_POINT("store.gc.after-delete");
  }
  // Junk: temporaries of dead adders, and trees that never got registered.
  for (auto& e : fs::directory_iterator(impl_->physicalRoot)) {
    std::string name = e.path().filename().string();
    bool isTemp = name.starts_with(kStoreTempPrefix);
    std::optional<StorePath> path;
    try {
      path = isTemp ? impl_->pathOfTemp(name) : std::optional(StorePath(name));
    } catch (const FormatError&) {
      continue;  // not ours; leave it alone
    }
    if (!path) continue;
    // A live adder temp-roots a path before writing its temporary, and
    // holds its stripe's lock from rename to registration.
    if (roots.count(*path) || (!isTemp && graph.count(*path))) continue;
    auto lock = FileLock::tryAcquire(
        impl_->stripeLockFile(Impl::stripeOf(*path)), LockMode::kExclusive);
    if (!lock) continue;  // an adder is at work in this stripe
    if (!isTemp && isValid(*path)) continue;
    res.bytesFreed += treeSize(e.path().string());
    ++res.junkRemoved;
    if (!dryRun) deletePath(e.path().string());
  }
  return res;
}

// ---------------------------------------------------------------- verify

VerifyResult LocalStore::verify(bool repair) {
  VerifyResult res;
  for (auto& path : queryAllValidPaths()) {
    auto info = queryPathInfo(path);
    if (!info) continue;  // collected meanwhile
    ++res.checked;
    std::string phys = physicalPath(path);
    std::optional<VerifyProblem> problem;
    if (!pathExists(phys)) {
      problem = VerifyProblem{VerifyProblem::Kind::kMissing, path,
                              "registered, but '" + phys + "' does not exist"};
    } else {
      try {
        HashingSink hasher(HashAlgo::kSha256);
        dumpPath(phys, hasher);
        auto [hash, size] = hasher.finish();
        if (hash != info->narHash || size != info->narSize)
          problem = VerifyProblem{
              VerifyProblem::Kind::kHashMismatch, path,
              "NAR hash " + hash.toNix32() + " (" + std::to_string(size) +
                  " bytes), registered " + info->narHash.toNix32() + " (" +
                  std::to_string(info->narSize) + " bytes)"};
      } catch (const Error& e) {
        problem =
            VerifyProblem{VerifyProblem::Kind::kUnreadable, path, e.what()};
      }
    }
    if (!problem || !isValid(path)) continue;
    if (repair && problem->kind == VerifyProblem::Kind::kMissing) {
      auto referrers = queryReferrers(path);
      referrers.erase(path);
      if (referrers.empty()) {
        auto lock = impl_->lockPath(path);
        auto lk = impl_->db.lock();
        retrySqlite([&] {
          SqliteTxn txn(**lk);
          impl_->invalidatePath(**lk, path);
          txn.commit();
        });
        problem->repaired = true;
        problem->detail += "; registration removed";
      } else {
        problem->detail += "; still referred to by '" +
                           printPath(*referrers.begin()) + "', not removed";
      }
    }
    res.problems.push_back(std::move(*problem));
  }
  return res;
}

}  // namespace kiln::store
