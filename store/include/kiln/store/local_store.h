#pragma once
/// The local store (design decision 2): store objects live as read-only
/// trees under a physical root (`<state>/store`), while their paths and
/// hashes use the logical store directory (default `/nix/store`). Metadata
/// sits in SQLite (`<state>/db/db.sqlite`, tables modelled on Nix's, spec
/// §8). Several processes may add, read and collect garbage at once:
/// adds are atomic (temporary name, fsync, read-only, rename, one
/// transaction), guarded by lock files (one per stripe of path names) and
/// by temporary GC roots. Many adds can share one sync, rename pass and
/// transaction (LocalStore::Batch). State directory layout:
/// docs/operations.md.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/common/error.h"
#include "kiln/common/hash.h"
#include "kiln/common/stream.h"
#include "kiln/store/nar.h"
#include "kiln/store/store_path.h"

namespace kiln::store {

class DrvHashCache;
struct Derivation;

/// Metadata of a valid store path, as registered in the database.
struct ValidPathInfo {
  explicit ValidPathInfo(StorePath p) : path(std::move(p)) {}

  StorePath path;
  Hash narHash{HashAlgo::kSha256};   ///< sha256 of the path's NAR
  uint64_t narSize = 0;              ///< byte size of the NAR
  StorePathSet references;           ///< may include `path` itself
  std::optional<StorePath> deriver;  ///< the .drv that built it, if known
  std::set<std::string> sigs;        ///< `keyname:base64` signatures
  std::string ca;                    ///< CA field (spec §2) or empty
  int64_t registrationTime = 0;      ///< Unix seconds; set by the store
  bool ultimate = false;             ///< built here (trusted without sigs)
};

/// A named path is not valid (not registered) in the store.
class InvalidPathError : public Error {
 public:
  using Error::Error;
};

/// Data whose NAR hash or size differs from what was announced (a corrupt
/// or truncated transfer, or a tree that changed while it was read).
class HashMismatchError : public FormatError {
 public:
  using FormatError::FormatError;
};

/// What collectGarbage did (or, in a dry run, would do).
struct GcResult {
  std::vector<StorePath> deleted;  ///< in deletion order
  uint64_t bytesFreed = 0;         ///< sizes of the deleted files
  size_t junkRemoved = 0;  ///< stale temporaries and unregistered entries
};

/// Root changes previewGarbage() takes as made: what a collection that
/// first changes its roots (say, `kiln store gc --keep-evaluations`) would
/// change, so that its dry run reports what the real run deletes.
struct GcRootChanges {
  std::set<std::string> droppedLinks;  ///< findRoots' links taken as gone
  StorePathSet addedRoots;             ///< paths taken as rooted
};

/// One problem verify() found.
struct VerifyProblem {
  enum class Kind { kMissing, kHashMismatch, kUnreadable };
  Kind kind;
  StorePath path;
  std::string detail;     ///< human-readable explanation
  bool repaired = false;  ///< whether verify(repair=true) fixed it
};

/// The outcome of verify().
struct VerifyResult {
  size_t checked = 0;                   ///< valid paths examined
  std::vector<VerifyProblem> problems;  ///< empty when the store is sound
};

/// A local store rooted at a state directory. Thread-safe: calls are
/// serialised on one SQLite connection. Errors: SysError (files),
/// SqliteError (database), FormatError (malformed NARs or names),
/// InvalidPathError (a path that must be valid is not), Error otherwise.
class LocalStore {
 public:
  /// Opens the store in `stateDir`, creating its layout and database (and
  /// migrating an older schema). Throws SchemaError for a database made by
  /// a newer kiln and Error if the state dir belongs to another logical
  /// store directory.
  explicit LocalStore(const std::string& stateDir,
                      const StoreDir& storeDir = StoreDir());
  ~LocalStore();
  LocalStore(const LocalStore&) = delete;
  LocalStore& operator=(const LocalStore&) = delete;

  const StoreDir& storeDir() const;
  const std::string& stateDir() const;
  /// Where the files live: `<state>/store`.
  const std::string& physicalRoot() const;
  /// The physical location of `path`.
  std::string physicalPath(const StorePath& path) const;
  /// The logical full path (`/nix/store/<base>`).
  std::string printPath(const StorePath& path) const;
  /// Parses a logical full path (or a path inside one); FormatError if not.
  StorePath parsePath(std::string_view full) const;

  // ------------------------------------------------------------ queries
  /// Whether `path` is registered.
  bool isValid(const StorePath& path);
  /// Metadata of `path`, or nullopt if it is not valid.
  std::optional<ValidPathInfo> queryPathInfo(const StorePath& path);
  /// Metadata of `path`; throws InvalidPathError if it is not valid.
  ValidPathInfo requirePathInfo(const StorePath& path);
  /// The valid path whose hash part is `hashPart` (what a binary cache's
  /// `<hashpart>.narinfo` names), or nullopt when none is valid. Throws
  /// FormatError unless `hashPart` is 32 nix32 characters.
  std::optional<StorePath> queryPathFromHashPart(std::string_view hashPart);
  /// Paths `path` refers to; InvalidPathError if not valid.
  StorePathSet queryReferences(const StorePath& path);
  /// Valid paths that refer to `path` (itself included if self-referencing).
  StorePathSet queryReferrers(const StorePath& path);
  /// The closure: `paths` and everything they reach through references.
  StorePathSet queryRequisites(const StorePathSet& paths);
  /// Output name → path registered for derivation `drv`.
  std::map<std::string, StorePath> queryDerivationOutputs(const StorePath& drv);
  /// Every valid path.
  StorePathSet queryAllValidPaths();
  /// A built path (one registered with a deriver) and its registration
  /// row's id, which only grows: later registrations have larger ids.
  struct BuiltPath {
    int64_t id = 0;
    StorePath path;
  };
  /// At most `limit` valid paths with a deriver whose row id is above
  /// `afterId`, by id: what a publisher that got as far as `afterId`
  /// still has to publish.
  std::vector<BuiltPath> queryBuiltPathsAfter(int64_t afterId, size_t limit);
  /// How many valid paths with a deriver have a row id above `afterId`.
  uint64_t countBuiltPathsAfter(int64_t afterId);
  /// How many paths are valid and the sum of their NAR sizes.
  struct Summary {
    uint64_t paths = 0;
    uint64_t narBytes = 0;
  };
  Summary summary();

  // --------------------------------------------------------------- adds
  /// Adds `info.path` from the NAR in `nar` (exactly one archive). The NAR's
  /// sha256 and size must equal info.narHash/narSize, every reference
  /// (other than the path itself) must be valid, a CA field (info.ca) must
  /// give the path and match the content (ContentMismatchError), and a
  /// `.drv` must be a derivation whose output paths are the ones its
  /// contents imply and whose references are its inputs
  /// (checkDerivationFile); otherwise nothing is registered or left in
  /// place and Error/FormatError is thrown. All of it is checked on the
  /// bytes written, read once. A path that is already valid is left alone
  /// (the source is not read).
  void addFromNar(const ValidPathInfo& info, Source& nar);
  /// Adds `info.path` from the finished tree at `tree` (a file, directory
  /// or symlink on the store's file system that nothing writes any more,
  /// e.g. a build's output, possibly already at the path's physical
  /// location) by moving it into the store instead of copying it: it is
  /// made canonical and checked as addFromNar checks a NAR, on the NAR
  /// dumped from it (one read, no copy, no temporary NAR). The tree is
  /// consumed: whatever happens, nothing is left at `tree` (a path already
  /// valid is left alone and the tree removed). Throws as addFromNar, and
  /// SysError when `tree` cannot be moved (another file system: EXDEV).
  void adoptTree(const ValidPathInfo& info, const std::string& tree);
  /// Adds the file or tree at `fsPath` as a `source` path named `name`
  /// (default: its base name), like `nix-store --add`; returns the path.
  /// With `filter`, only the entries it accepts are copied (as
  /// builtins.filterSource does); it is called on this thread for the
  /// hashing pass and again from a helper thread for the copy, so it must
  /// give the same answers both times and be safe to call from another
  /// thread. Throws Error if the tree changes while it is copied.
  StorePath addPath(const std::string& fsPath, std::string_view name = "",
                    const NarPathFilter& filter = {});
  /// Adds a `text` path (like builtins.toFile or a .drv) with `refs`.
  StorePath addText(std::string_view name, std::string_view contents,
                    const StorePathSet& refs);
  /// Records the outputs of valid derivation `drv` (output name → path).
  void registerDerivationOutputs(
      const StorePath& drv, const std::map<std::string, StorePath>& outputs);

  class Batch;

  /// Whether adds make the files of a path durable before registering it.
  enum class ContentSync {
    /// Each add fsyncs every file it wrote and the store directory before
    /// the registration commits (the default).
    kDurable,
    /// Nothing is fsynced for the files (Nix's default: it has no
    /// per-path fsync either), and the database commits without an fsync
    /// each (WAL, synchronous = NORMAL, as Nix's store). After a power
    /// loss a path registered shortly before may be unregistered again, or
    /// empty or truncated: `kiln store verify` reports it as a hash
    /// mismatch.
    kNone,
  };
  /// Sets how adds sync; kNone applies to every add and Batch, whatever
  /// its Batch::Sync. Call it before the store is shared with threads.
  void setContentSync(ContentSync sync);
  /// How adds sync (setContentSync; kDurable by default).
  ContentSync contentSync() const;
  /// The clock of registration times (RealClock by default); it must
  /// outlive the store. Call it before the store is shared with threads.
  void setClock(const Clock& clock);

  // ------------------------------------------------ GC roots, GC, verify
  /// Makes `path` (which must be valid) a permanent root: a symlink
  /// `<state>/gcroots/<name>` to its logical path; replaces an existing
  /// root of that name. `name` may contain '/' but no "." or ".." parts.
  /// Returns the link's path.
  std::string addRoot(const std::string& name, const StorePath& path);
  /// Removes the permanent root `name` (as addRoot names it); returns
  /// whether there was one. Throws FormatError for a bad name.
  bool removeRoot(const std::string& name);
  /// Makes `link` (a path outside the state directory, e.g. `./result`) a
  /// symlink to the logical path of valid `path` and registers it as an
  /// indirect root, `<state>/gcroots/auto/<nix32 sha1 of link>` → `link`,
  /// as Nix's `--add-root` does: the root holds while `link` still leads
  /// to a store path. Replaces a symlink at `link`; throws Error if
  /// something else is there, InvalidPathError if `path` is not valid.
  /// Returns the auto link's path. With `physicalTarget`, `link` leads to
  /// the path under the physical root instead (where the object is on
  /// this machine when the store is not at its logical directory).
  std::string addIndirectRoot(const StorePath& path, const std::string& link,
                              bool physicalTarget = false);
  /// Root link → store path, for every link under `<state>/gcroots` that
  /// resolves (directly or through further symlinks) to a store path.
  std::map<std::string, StorePath> findRoots();
  /// Protects `path` from garbage collection until this store object is
  /// destroyed (also done internally for paths being added).
  void addTempRoot(const StorePath& path);
  /// Deletes every valid path not reachable from a root or a temporary root
  /// of a live process, referrers before their references, plus stale
  /// temporaries. With `dryRun`, only reports. Excludes other collectors.
  GcResult collectGarbage(bool dryRun = false);
  /// What collectGarbage would delete were the roots changed by `changes`
  /// (a dry run: nothing in the store is deleted, no root is touched).
  GcResult previewGarbage(const GcRootChanges& changes);
  /// Re-hashes every valid path and reports missing files and NAR hash or
  /// size mismatches. With `repair`, registrations whose files vanished
  /// and that nothing else refers to are removed.
  VerifyResult verify(bool repair = false);

 private:
  GcResult runGc(bool dryRun, const GcRootChanges* changes);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Adds many paths at the cost of a few: each add writes its tree under a
/// temporary name (read-only, not yet synced) and is queued; commit() makes
/// every queued tree durable at once (one syncfs of the store's filesystem),
/// renames them into place, fsyncs the store directory once and registers
/// them all, with their derivation outputs, in one transaction, in the
/// order they were added, so a path may refer to one queued before it.
/// Safety is that of single adds: nothing is registered before its files
/// are durable; queued paths and their references are temporary roots from
/// the moment they are queued (a collector keeps the temporaries too);
/// adders of the same path serialise on its lock stripe while renaming and
/// registering, and the one that finds it valid discards its copy.
/// Holds no file descriptor per queued path. Used by one thread at a time;
/// the LocalStore must outlive it. A queued path is not valid (nor at its
/// physical path) until commit() returns.
class LocalStore::Batch {
 public:
  /// How commit() makes the files durable: kFileSystem syncs the whole
  /// filesystem once (cheap for many paths); kEachFile fsyncs every file as
  /// it is written (cheap for one path on a filesystem others are writing);
  /// kNone syncs neither files nor the store directory (what every batch
  /// of a store set to ContentSync::kNone does).
  enum class Sync { kFileSystem, kEachFile, kNone };
  explicit Batch(LocalStore& store, Sync sync = Sync::kFileSystem);
  /// Discards what was not committed: temporaries are deleted and nothing
  /// is registered. Never throws.
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  /// Queues `info.path` from the NAR in `nar`, checked as
  /// LocalStore::addFromNar checks it, except that a reference may also be
  /// a path queued earlier in this batch. A path already valid or queued is
  /// left alone (`nar` is not read). On failure nothing of this path is
  /// queued or left on disk, and earlier adds stay queued.
  void addFromNar(const ValidPathInfo& info, Source& nar);
  /// As addFromNar, for a NAR whose NarHash, references and content
  /// address the caller itself computed on these very bytes (e.g. the
  /// farm's verifier of a direct upload, store::verifyStaged): it is
  /// restored and its size checked, but not hashed again.
  void addVerifiedNar(const ValidPathInfo& info, Source& nar);
  /// Queues `info.path` from the finished tree `tree`, moved and checked
  /// as LocalStore::adoptTree does (references as addFromNar here). The
  /// tree is consumed whatever happens.
  void adoptTree(const ValidPathInfo& info, const std::string& tree);
  /// Queues a `text` path, as LocalStore::addText; returns it.
  StorePath addText(std::string_view name, std::string_view contents,
                    const StorePathSet& refs);
  /// Queues a `source` path, as LocalStore::addPath; returns it.
  StorePath addPath(const std::string& fsPath, std::string_view name = "",
                    const NarPathFilter& filter = {});
  /// Derivations `cache` computed or checked the outputs of
  /// (DrvHashCache::outputsChecked) are not checked again when they are
  /// added with addText: an evaluator that wrote them passes its own
  /// cache. addText computes the text path from the contents, which pins
  /// them, so only the path is looked up. `cache` (nullptr: none) must
  /// outlive its use here.
  void trustHashes(const DrvHashCache* cache);
  /// Hands every `.drv` this batch parses and checks from now on (as
  /// checkDerivationFile does: a path queued by addFromNar or adoptTree,
  /// or by addText unless trusted) to `sink`, so its user need not read and
  /// check it again once committed. `sink` must not throw.
  void keepCheckedDerivations(
      std::function<void(const StorePath&, Derivation&&)> sink);
  /// Records `outputs` of `drv` with `drv`'s registration when it is
  /// queued here, else (a valid `drv`, temp-rooted from now on) in the
  /// transaction of the next commit(), even if nothing else is queued.
  /// InvalidPathError if `drv` is neither queued nor valid.
  void registerDerivationOutputs(
      const StorePath& drv, const std::map<std::string, StorePath>& outputs);
  /// Whether `path` is queued (added and not yet committed).
  bool queued(const StorePath& path) const;
  /// How many paths are queued.
  size_t size() const;
  /// Makes every queued path durable and valid (see the class comment);
  /// afterwards the batch is empty and can be reused. On failure nothing
  /// queued is registered, the batch is empty and its files are removed.
  void commit();

 private:
  /// Queues `info.path` from the NAR in `nar` or, when `nar` is null, from
  /// the tree a caller moved to temporary name `adopted`; `caComputed`:
  /// info.ca was computed here from the content (addText), so it is not
  /// checked again. Returns whether it was queued (false: already valid
  /// or queued, `nar` unread and `adopted` untouched). With `hashed`, the
  /// caller hashed `nar` itself (addVerifiedNar): only its size is checked.
  bool add(const ValidPathInfo& info, Source* nar, const std::string& adopted,
           bool caComputed, bool hashed = false);

  struct State;
  LocalStore& store_;
  std::unique_ptr<State> state_;
};

/// The prefix of the temporary names adds write under the physical root
/// (`<prefix><pid>-<n>-<base name>`); never a valid store path name.
inline constexpr std::string_view kStoreTempPrefix = ".kiln-tmp-";

}  // namespace kiln::store
