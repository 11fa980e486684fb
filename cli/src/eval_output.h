#pragma once
/// What `kiln eval` prints for each job: kiln's own lines and JSON, and
/// nix-eval-jobs' JSON lines (`--format nix-eval-jobs`, docs/formats.md
/// "kiln eval output"), with what nix-eval-jobs adds to them: cache status
/// (`--check-cache-status`) and aggregate jobs' constituents resolved to
/// `.drv` paths (`--constituents`).

#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "aggregate_drv.h"
#include "kiln/evaluator/jobs.h"

namespace kiln::store {
class LocalStore;
class CacheStorage;
class BinaryCacheReader;
}  // namespace kiln::store

namespace kiln::cli {

/// How job lines are written.
enum class JobFormat {
  kLines,        ///< `attr drvPath` or `attr: error: …`
  kJson,         ///< kiln's JSON (`--json`, what the scheduler reads)
  kNixEvalJobs,  ///< nix-eval-jobs' field names and meanings
};

/// Parses `lines`, `json` or `nix-eval-jobs`; throws Error naming the
/// accepted values otherwise.
JobFormat parseJobFormat(const std::string& text);

/// One job's line (with its newline). `meta`: include `meta` in the
/// nix-eval-jobs format (nix-eval-jobs' `--meta`; kiln's JSON always has
/// it).
std::string formatJob(const eval::Job& job, JobFormat format, bool meta);

/// The attribute path of a dotted job attribute ("a.\"b.c\".d" → a, b.c,
/// d), as nix-eval-jobs' `attrPath`.
std::vector<std::string> splitJobAttr(const std::string& attr);

/// What a job's outputs need, as nix-eval-jobs' `--check-cache-status`
/// reports it (Nix's queryMissing): the derivations to build (dependencies
/// first), the paths to fetch from the caches (by name), and paths neither
/// valid nor in a cache.
struct CacheStatus {
  std::string status;  ///< "local", "cached" or "notBuilt"
  std::vector<std::string> neededBuilds;
  std::vector<std::string> neededSubstitutes;
};

/// Answers CacheStatus for jobs whose `.drv` files are valid in `store`,
/// against the binary caches at `cacheUrls` (tried in order; one that fails
/// is reported on stderr once and then ignored). Remembers every answer
/// (narinfos, `.drv` files, validity), so shared dependencies are looked
/// up once. Not thread-safe.
class CacheStatusChecker {
 public:
  CacheStatusChecker(store::LocalStore& store, const std::vector<std::string>& cacheUrls);
  ~CacheStatusChecker();
  CacheStatusChecker(const CacheStatusChecker&) = delete;
  CacheStatusChecker& operator=(const CacheStatusChecker&) = delete;

  /// The status of derivation `drvPath` (a logical store path). Throws
  /// Error when the `.drv` cannot be read from the store.
  CacheStatus check(const std::string& drvPath);
  /// Adds the fields nix-eval-jobs adds (`isCached`, `cacheStatus`,
  /// `neededBuilds`, `neededSubstitutes`) to every JSON job line in
  /// `text` that has a `drvPath`; other lines pass unchanged.
  std::string annotate(const std::string& text);

 private:
  struct Cache;
  /// A `.drv` as the walk needs it: its output paths (`complete` unless
  /// one is not known in advance) and its input derivations.
  struct DrvNode {
    std::vector<std::string> outputs;
    bool complete = true;
    std::vector<std::string> inputs;
  };
  const DrvNode& node(const std::string& drvPath);
  bool valid(const std::string& path);
  bool outputsValid(const std::vector<std::string>& outputs);
  std::optional<std::set<std::string>> inCache(const std::string& path);
  void visitDrv(const std::string& drvPath, CacheStatus& st, std::set<std::string>& subs,
                std::set<std::string>& seen, bool& unknown);
  void addSubstitute(const std::string& path, std::set<std::string>& subs,
                     std::set<std::string>& seen, bool& unknown);

  store::LocalStore& store_;
  std::vector<std::unique_ptr<Cache>> caches_;
  std::map<std::string, std::optional<std::set<std::string>>> narInfos_;  // path → refs
  // Jobs share most of their closures: each `.drv` is read, and each
  // path's validity asked, once per process.
  std::map<std::string, DrvNode> drvs_;
  std::map<std::string, bool> valid_;
};

/// Holds aggregate jobs (JSON lines with `namedConstituents`) until every
/// job is known, passing the others on at once; then resolves each named
/// constituent to that job's `drvPath` (appended to `constituents`, the
/// `namedConstituents` field removed). An aggregate naming a job that does
/// not exist or failed (directly or through another aggregate) gets an
/// `error` listing each such name and why. Aggregates are printed last, in
/// attribute order.
class ConstituentResolver {
 public:
  /// Makes an aggregate's derivation depend on all its constituents
  /// (AggregateRewriter::rewrite): takes its `.drv` path and theirs, gives
  /// the `.drv` path and outputs to report. Throws Error.
  using Rewrite = std::function<RewrittenDrv(const std::string& drvPath,
                                             const std::vector<std::string>& all)>;
  /// With `rewrite`, every aggregate is held (not only those naming
  /// constituents) and rewritten; without, named constituents are only
  /// listed (the aggregate's derivation does not depend on them).
  explicit ConstituentResolver(std::ostream& out, Rewrite rewrite = {})
      : out_(out), rewrite_(std::move(rewrite)) {}
  /// Takes printed text (whole lines).
  void add(const std::string& text);
  /// Resolves and prints the aggregates held; returns how many of them
  /// failed (a constituent missing or failed).
  size_t finish();

 private:
  std::ostream& out_;
  Rewrite rewrite_;
  std::map<std::string, std::string> drvOf_;    // attr → drvPath
  std::map<std::string, std::string> errorOf_;  // attr → error
  std::map<std::string, std::string> held_;     // attr → its JSON line
};

class EvalStoreTarget;

/// The output stage of one `kiln eval`: installs on `target` the cache
/// status (a CacheStatusChecker over the target's store, made on first
/// use in each process) and the ConstituentResolver, as asked.
class JobOutputStage {
 public:
  /// Throws Error when the cache status is asked of a read-only target
  /// (it reads the jobs' `.drv` files from the store).
  JobOutputStage(EvalStoreTarget& target, bool checkCacheStatus,
                 std::vector<std::string> cacheUrls, bool constituents);
  ~JobOutputStage();
  JobOutputStage(const JobOutputStage&) = delete;
  JobOutputStage& operator=(const JobOutputStage&) = delete;

  /// In a forked worker process: its own checker, its lines to stdout
  /// (the parent resolves constituents).
  void afterFork();
  /// Where worker processes' lines go: stdout, or a memory file that
  /// collectWorkers() reads when constituents are resolved. Throws
  /// SysError if that file cannot be made.
  int workerOutputFd();
  /// Feeds what worker processes wrote to workerOutputFd() to the resolver.
  void collectWorkers();
  /// Resolves and prints the aggregates held (no-op without constituents);
  /// returns how many failed.
  size_t finish();

 private:
  EvalStoreTarget& target_;
  std::vector<std::string> cacheUrls_;
  std::unique_ptr<CacheStatusChecker> checker_;
  std::unique_ptr<ConstituentResolver> resolver_;
  std::unique_ptr<AggregateRewriter> rewriter_;
  int memFd_ = -1;
};

}  // namespace kiln::cli
