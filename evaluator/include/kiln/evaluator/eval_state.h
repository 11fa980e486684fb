#pragma once
/// The evaluator: parses Nix files and expressions and evaluates them
/// lazily. One EvalState owns every AST node and value it creates (in its
/// arena); values stay valid for the state's lifetime. One thread at a
/// time, except between beginThreads and endThreads (threaded evaluation,
/// docs/evaluator.md), when up to kMaxThreads threads may evaluate.

#include <cstddef>
#include <functional>
#include <mutex>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/evaluator/arena.h"
#include "kiln/evaluator/ast.h"
#include "kiln/evaluator/eval_error.h"
#include "kiln/evaluator/store_writer.h"
#include "kiln/evaluator/value.h"

namespace kiln::eval {

struct AllocCounts;
class EvalHeap;
class ThreadSlots;
class FileCache;
class BuiltinTable;
class EvalStoreWriter;
class EvalParts;

/// Settings an evaluation runs with.
struct EvalSettings {
  std::string storeDir = "/nix/store";
  std::string currentSystem = "x86_64-linux";  ///< builtins.currentSystem (`system`)
  /// Search path entries as `prefix=path` or `path` (from -I then NIX_PATH).
  std::vector<std::string> searchPath;
  /// When true, nothing is written to a store (paths are only computed).
  bool readOnly = true;
  /// Maximum nesting of function calls before "stack overflow" errors.
  uint32_t maxCallDepth = 10000;
  /// Add a "while evaluating 'f'" / "from call site" trace pair for every
  /// function call an error passes through (--show-trace).
  bool showTrace = false;
  /// Print "instantiated 'NAME' -> 'DRV'" on stderr for each derivation
  /// (Nix's chatty log level: nix-instantiate -vv).
  bool logInstantiations = false;
  /// Nix's `restrict-eval`: files (import, readFile, readDir, pathExists,
  /// path, filterSource, interpolated paths, storePath, <…> lookups) only
  /// within the search path entries, `allowedPaths` and store paths this
  /// evaluation made; `getEnv` returns ""; network fetchers only for
  /// `allowedUris`. Refusals throw RestrictedPathError.
  bool restrictEval = false;
  /// Absolute paths readable in restricted mode besides the search path
  /// (kiln eval --allow-path: a jobset's inputs).
  std::vector<std::string> allowedPaths;
  /// URI prefixes fetchers may use in restricted mode (Nix's allowed-uris).
  std::vector<std::string> allowedUris;
  /// Refuse `builtins.currentTime` (kiln eval --restrict-eval: a jobset's
  /// derivations must not change with the clock). Nix keeps it in
  /// restrict-eval, so kiln instantiate does too.
  bool refuseCurrentTime = false;
  /// Appended to every restricted-mode refusal: how to allow it ("" for
  /// Nix's exact wording).
  std::string restrictHint;
  /// Nix 2.8's `pure-eval`: files only within `allowedPaths` and store
  /// paths this evaluation made (the search path is ignored: `<…>` fails,
  /// `nixPath` is empty), `currentTime` and `currentSystem` are not
  /// defined, `getEnv` returns "", `storePath` is refused and fetchers
  /// need a hash (fetchGit/fetchTree a `rev`). Refusals use Nix's wording.
  bool pureEval = false;
  /// Threads a large file may be parsed on (docs/evaluator.md, "Parsing a
  /// large file on two threads"): 2 or more splits files of
  /// kParseSplitBytes and more in two (kiln eval --workers 2+); 1 parses
  /// on the calling thread alone.
  uint32_t parseThreads = 1;
  /// Whether file access is limited (restrict-eval or pure-eval).
  bool restrictsPaths() const { return restrictEval || pureEval; }
};

class EvalState;

/// String context: store paths a string refers to, Nix-encoded
/// ("/nix/store/…", "=/nix/store/….drv", "!out!/nix/store/….drv"), being
/// collected. Entries are added in any order and read back sorted and
/// without duplicates (as a set), sorted once when first read after an
/// insertion: a derivation's context is gathered from every attribute
/// (often the same entries many times) and read once, and a set's node per
/// entry cost an allocation and string comparisons per insertion. The
/// texts are borrowed (arena or collector memory). Not shared by threads.
class Context {
 public:
  using const_iterator = std::vector<std::string_view>::const_iterator;
  Context() = default;
  /// Adds `s` (an entry already there is kept once).
  void insert(std::string_view s) {
    if (!items_.empty() && items_.back().data() == s.data()) return;  // again
    items_.push_back(s);
    if (items_.size() > 1) sorted_ = false;
    if (items_.size() >= compactAt_) compact();
  }
  /// Adds every entry of [first, last).
  template <class It>
  void insert(It first, It last) {
    for (; first != last; ++first) insert(std::string_view(*first));
  }
  /// Whether no entry was added.
  bool empty() const { return items_.empty(); }
  /// Distinct entries.
  size_t size() const { return sorted().size(); }
  /// The distinct entries, sorted.
  const_iterator begin() const { return sorted().begin(); }
  const_iterator end() const { return sorted().end(); }

 private:
  const std::vector<std::string_view>& sorted() const;
  // Sorts and drops duplicates now; the next compaction comes when the
  // entries have doubled (a loop adding the same few entries stays small).
  void compact() const;
  mutable std::vector<std::string_view> items_;
  mutable bool sorted_ = true;
  mutable size_t compactAt_ = 64;
};

class EvalState {
 public:
  explicit EvalState(EvalSettings settings = {});
  ~EvalState();
  EvalState(const EvalState&) = delete;
  EvalState& operator=(const EvalState&) = delete;

  // ---- the evaluator's parts (evaluator-internal: each defined in its
  // header under evaluator/src/, reached inline through eval_parts.h) ----
  /// Allocation of values, environments, sets, lists, strings (eval_heap.h).
  inline EvalHeap& heap();
  /// The slots of the threads that evaluate (thread_slots.h).
  inline ThreadSlots& threads();
  /// Imported files and copied sources (file_cache.h).
  inline FileCache& files();
  /// Where store objects go, locked while threaded (eval_store_writer.h).
  inline EvalStoreWriter& writer();
  /// The builtins and the base environment (builtin_table.h).
  inline BuiltinTable& builtins();

  /// AST nodes, strings, contexts: memory the garbage collector does not
  /// scan (nothing in it points to collectable memory).
  Arena arena;
  /// What lives as long as the state and may point to collectable values:
  /// the base environment, builtins, cached imports (scanned).
  Arena permanent{true};
  SymbolTable symbols;
  PosTable positions;
  const EvalSettings settings;
  /// Writes the store objects the evaluation makes to `writer` (not owned;
  /// nullptr, the default: nothing is written). Not while threaded.
  void setStoreWriter(StoreWriter* writer);
  /// The writer set, or nullptr.
  StoreWriter* storeWriter();

  // ---- parsing ----
  /// Parses `text`; relative paths resolve against `basePath`.
  Expr* parseExprFromString(std::string text, const std::string& basePath,
                            const std::string& origin = "«string»");
  /// Parses a file (a directory means its default.nix).
  Expr* parseExprFromFile(const std::string& path);
  /// Parses in a scope extended by `scope`'s attributes (scopedImport).
  Expr* parseWithScope(const std::string& path, Value* scope, Env*& envOut);

  // ---- evaluation ----
  /// Evaluates `e` in the base environment.
  void eval(Expr* e, Value& v);
  /// Makes `v` a thunk of `e` in the base environment (evaluated when
  /// forced: a lazy `--arg`).
  void mkThunk(Value& v, Expr* e);
  /// Evaluates a file, caching the result per resolved path (import).
  void evalFile(const std::string& path, Value& v);
  /// Evaluates a thunk or application in place; values are forced once
  /// (in threaded evaluation by whichever thread claims it first; the
  /// others wait for it).
  void forceValue(Value& v, PosIdx pos) {
    if (__builtin_expect(static_cast<uint8_t>(valueState(v)) <=
                             static_cast<uint8_t>(VType::kBlackhole), 0))
      forceThunk(v, pos);
  }
  void forceThunk(Value& v, PosIdx pos);

  // ---- threaded evaluation (docs/evaluator.md, "Threaded evaluation") ----
  /// The most threads that may evaluate at once.
  static constexpr uint32_t kMaxThreads = 64;
  /// Switches to threaded evaluation: from now until endThreads, threads
  /// that called enterThread(1..threads) may evaluate concurrently (each
  /// slot used by one thread at a time). Call with no evaluation running;
  /// wraps the store writer in a lock.
  void beginThreads(uint32_t threads = kMaxThreads);
  /// Back to one thread: every evaluating thread has left.
  void endThreads();
  /// Makes the calling thread evaluate as `slot` (1..kMaxThreads).
  static void enterThread(uint32_t slot);
  /// Forces every reachable value (for --strict / deepSeq). The other
  /// forcing, coercion, comparison and error services are the evaluator's
  /// own: evaluator/src/eval_services.h.
  void forceValueDeep(Value& v);
  /// Calls `fun` with `args` for its formals if it is a function taking a
  /// set (nix-instantiate's --arg handling); otherwise copies it.
  void autoCallFunction(Bindings* args, Value& fun, Value& res);

  // ---- allocation (EvalHeap, evaluator/src/eval_heap.h) ----
  /// A new value, for callers outside the evaluator (the evaluator's own
  /// code allocates through heap(), inline).
  Value* allocValue();
  /// A set with room for `capacity` attributes, for callers outside the
  /// evaluator (as allocValue).
  Bindings* allocBindings(uint32_t capacity);
  /// Makes `v` a list of `n` (unset) elements.
  inline void mkList(Value& v, size_t n);
  /// Makes `v` a string: a collectable copy of `s` with `ctx`.
  void mkString(Value& v, std::string_view s, const Context& ctx = {});
  void mkPath(Value& v, std::string_view p) { v.mkPath(arena.copyString(p)); }
  /// Builds an attribute set from `attrs`, sorting it.
  void mkAttrs(Value& v, Bindings* b) {
    b->sort();
    v.mkAttrs(b);
  }
  Symbol sym(std::string_view s) { return symbols.intern(s); }

  // ---- the search path ----
  /// The search path as {prefix, path} pairs.
  std::vector<std::pair<std::string, std::string>> searchPathEntries;
  std::string findFile(std::string_view path, PosIdx pos);
  /// Looks `path` up in `entries` ({prefix, dir} pairs; `<nix/…>` falls
  /// back to the built-in corepkgs); warns once per missing entry, as Nix.
  /// Throws ThrownError when nothing has it.
  std::string findFileIn(const std::vector<std::pair<std::string, std::string>>& entries,
                         std::string_view path, PosIdx pos);

  // ---- restricted evaluation (restrict.cc) ----
  /// Returns `path` (absolute) if it may be read: always when not
  /// restricted; else when it and its symlink-resolved form lie within an
  /// allowed path (then the resolved form is returned). Throws
  /// RestrictedPathError naming the path otherwise.
  std::string checkSourcePath(const std::string& path);
  /// Throws RestrictedPathError unless `uri` may be fetched (restricted
  /// mode: equal to or below an allowed-uris prefix, or an allowed path).
  void checkUri(const std::string& uri);
  /// Makes `path` (and what is below it) readable in restricted mode.
  void allowPath(const std::string& path);
  /// Makes `v` a thunk that throws RestrictedPathError(`message`) each
  /// time it is forced (a builtin constant refused in restricted mode).
  void mkRefused(Value& v, std::string message);

  // Well-known symbols.
  Symbol sOutPath, sDrvPath, sType, sName, sValue, sFunctor, sToString, sOverrides,
      sFile, sLine, sColumn, sSuccess, sOutputs, sOutputName, sSystem, sBuilder, sArgs,
      sRecurseForDerivations, sIgnoreNulls, sStructuredAttrs, sAll, sKey, sOperator,
      sStartSet, sPath, sPrefix, sContentAddressed, sRight, sWrong, sMeta, sOr, sBody,
      sOutputHash, sOutputHashAlgo, sOutputHashMode, sAllowedReferences, sWith;

  Value vEmptyAttrs;
  Value vTrue, vFalse, vNull;

 private:
  void createBaseEnv();
  /// Fills allowedPaths_ from the search path and settings.allowedPaths.
  void initAllowedPaths();
  /// Whether `path` is within one of allowedPaths_.
  bool isAllowed(const std::string& path) const;
  std::vector<std::string> allowedPaths_;
  std::set<std::string> missingEntriesWarned_;  ///< search path entries warned about
  void forceThunkThreaded(Value& v, PosIdx pos);
  std::mutex warnedMutex_;         // missingEntriesWarned_
  mutable std::mutex pathsMutex_;  // allowedPaths_
  /// A lock on `m` when threaded, none otherwise.
  inline std::unique_lock<std::mutex> lockIfThreaded(std::mutex& m) const;
  bool registeredThread_ = false;  // the constructor registered its thread
  /// Parses and binds `text`; with `originPath`, also gives the path as
  /// kept in `positions` (valid as long as the state).
  Expr* parse(std::string text, const std::string& path, const std::string& basePath,
              const StaticEnv& env, std::string_view* originPath = nullptr);
  /// parseExprFromFile for a resolved `file`, giving its origin path.
  Expr* parseFile(const std::string& file, std::string_view* originPath);
  /// The parts themselves (EvalParts, evaluator/src/eval_parts.h), stored
  /// in the state so that reaching one costs no pointer load: the
  /// evaluator's hot paths (allocValue, a thread's slot) are an offset
  /// from the state. eval_parts.h checks that EvalParts fits.
  static constexpr size_t kPartsBytes = 82 * 1024;
  alignas(64) unsigned char parts_[kPartsBytes];
  friend class EvalParts;
};

/// Initialises the garbage collector, once per process. Must first run on
/// the main thread (the collector finds the main stack from it):
/// runWithLargeStack and the Arena call it. Forking is safe afterwards (job
/// workers).
void initGarbageCollector();

/// Threaded evaluation (`kiln eval --workers N`): with `threads` > 1
/// collections start at 256 MiB allocated instead of 80 MiB, since a
/// collection stops every thread, and mark on two threads instead of one;
/// one thread collects as one process does (collectorPolicyFor;
/// docs/evaluator.md, "Garbage collection"). Only a call before
/// initGarbageCollector's first has an effect.
void setCollectorForThreads(unsigned threads);

/// When the collector first collects, and from which heap size its
/// free-space divisor is 2 (freeSpaceDivisorFor).
struct CollectorPolicy {
  size_t firstCollection = 0;  ///< bytes allocated before the first
  size_t largeHeap = 0;        ///< heap bytes for divisor 2 (0: never)
};

/// The policy for `threads` evaluating threads (0 or 1: one), before the
/// KILN_GC_* overrides: one thread's whether threaded or not.
CollectorPolicy collectorPolicyFor(unsigned threads);

/// The collector's free-space divisor for a heap of `heapBytes`: 1, or 2
/// from `largeHeapBytes` on (0: always 1). One evaluating thread switches
/// to it as its heap grows (gc_setup.cc; docs/evaluator.md, "Garbage
/// collection").
unsigned long freeSpaceDivisorFor(size_t heapBytes, size_t largeHeapBytes);

/// Makes the collector's size classes for objects of 384-2,047 bytes, the
/// largest size of each count of objects a 4 KiB block holds, before
/// anything else asks for such sizes (initGarbageCollector calls it first);
/// returns the object size each request got (docs/evaluator.md, "Garbage
/// collection": "Size classes").
std::vector<size_t> shapeSizeClasses();

/// What the heap warmer did in this process so far (threaded evaluation
/// with two or more threads; docs/evaluator.md, "Parallel evaluation"):
/// bytes of new heap it populated before the allocator reached them, and
/// bytes it grew the heap by ahead of need.
struct HeapWarmerStats {
  uint64_t populatedBytes = 0;
  uint64_t grownBytes = 0;
};
HeapWarmerStats heapWarmerStats();

/// Runs `fn` on a thread with a large stack (deep but finite recursion in
/// Nix code must not overflow the C++ stack before the depth limit).
void runWithLargeStack(const std::function<void()>& fn, size_t stackBytes = 512u << 20);

/// Resolves `path` (e.g. "nixpkgs/lib") against one search path entry
/// (`prefix`, `dir`); nullopt if the entry does not apply or nothing exists.
std::optional<std::string> resolveSearchPath(const std::string& prefix, const std::string& dir,
                                             std::string_view path);

/// Canonicalises an absolute path: removes ".", "..", doubled and trailing
/// slashes (no symlink resolution).
std::string canonPath(std::string_view path);
/// canonPath into `out` (replacing its contents), reusing its capacity.
void canonPathInto(std::string_view path, std::string& out);

}  // namespace kiln::eval
