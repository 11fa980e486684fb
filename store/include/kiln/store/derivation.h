#pragma once
/// Derivations (spec §3): the record, the ATerm `.drv` format (a strict
/// parser and a printer byte-identical to Nix 2.8), derivation types,
/// hashDerivationModulo with a memoising cache, output and `.drv` paths, and
/// the `nix show-derivation` JSON shape.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <boost/container/flat_map.hpp>

#include "kiln/common/hash.h"
#include "kiln/common/spin_mutex.h"
#include "kiln/store/base_name_map.h"
#include "kiln/store/store_path.h"

namespace kiln::store {

/// Largest `.drv` accepted by the parser and loaders (bytes). Real ones are
/// at most a few MiB; anything larger is treated as malformed.
inline constexpr size_t kMaxDerivationSize = 64u << 20;

/// One output tuple `(name, path, hashAlgo, hash)` (the name is the map key).
/// The valid combinations are: input-addressed (path, "", ""), fixed-output
/// (path, "[r:]algo", hex), floating content-addressed ("", "[r:]algo", "")
/// and deferred / not yet computed ("", "", "").
struct DerivationOutput {
  std::optional<StorePath> path;  ///< absent while masked, floating or deferred
  std::string hashAlgo;  ///< "", "<algo>" (flat) or "r:<algo>" (recursive)
  std::string hash;      ///< "" or the lowercase base16 digest

  bool operator==(const DerivationOutput&) const = default;
};

/// A derivation's environment: sorted by key, in one array (a derivation
/// has tens of entries, built in key order: no tree node per entry).
using DerivationEnv = boost::container::flat_map<std::string, std::string>;

/// A derivation as stored in a `.drv` file. Value type; owns everything.
struct Derivation {
  /// The derivation name (the `.drv` base name without hash and ".drv").
  /// Not part of the ATerm; set by the evaluator or from the file's path.
  std::string name;
  std::map<std::string, DerivationOutput> outputs;  ///< by output name
  /// Input derivations (paths ending in ".drv") -> output names used.
  std::map<StorePath, std::set<std::string>> inputDrvs;
  StorePathSet inputSrcs;         ///< sources (and other non-drv inputs)
  std::string platform;           ///< the `system` field
  std::string builder;            ///< program to run
  std::vector<std::string> args;  ///< its arguments, in order
  DerivationEnv env;              ///< environment, sorted by key

  bool operator==(const Derivation&) const = default;
};

/// Parses a `.drv` file's contents. `what` names the input in errors (for
/// example its path); `name` becomes Derivation::name. Strict: throws
/// FormatError naming `what`, the byte offset and the problem for truncated
/// input, unknown tokens, bad escapes, raw control characters that Nix would
/// have escaped, unsorted or duplicate entries, invalid store paths, invalid
/// output tuples, trailing bytes or input larger than kMaxDerivationSize.
Derivation parseDerivation(const StoreDir& storeDir, std::string_view text,
                           std::string_view name, std::string_view what = "");

/// Reads and parses the `.drv` file at `file`; the name comes from the
/// file's base name (`<hash>-<name>.drv`). Throws SysError if it cannot be
/// read, FormatError if it is too large or malformed.
Derivation readDerivationFile(const StoreDir& storeDir,
                              const std::string& file);

/// Prints the ATerm exactly as Nix writes it (no trailing newline). With
/// `maskOutputs`, output paths and the env entries named after outputs are
/// printed as "" (spec §3.5 step 1).
std::string printDerivation(const StoreDir& storeDir, const Derivation& drv,
                            bool maskOutputs = false);

/// Appends `s` as an ATerm string literal (quotes included), escaping only
/// `"`, `\`, LF, CR and TAB (spec §3.1).
void printAtermString(std::string& out, std::string_view s);

/// What kind of derivation a record is (from its output tuples).
enum class DerivationType {
  kInputAddressed,  ///< every output has a path and no hash
  kFixedOutput,     ///< one output "out" with a path and a content hash
  kFloatingCA,      ///< outputs with hashAlgo but no path (experimental)
  kDeferred,        ///< outputs not computed yet (all fields empty)
};

/// Classifies `drv`; throws FormatError for a derivation without outputs,
/// mixed output kinds, or a fixed output not named "out" / not alone.
DerivationType derivationType(const Derivation& drv);

/// Whether `drv` is a fixed-output derivation (spec §3.3).
bool isFixedOutput(const Derivation& drv);

/// Builds the fixed output tuple from the `outputHash`, `outputHashAlgo`
/// (may be empty when the hash is SRI or `algo:`-prefixed) and
/// `outputHashMode` ("flat" or "recursive") attributes; the hash may be
/// written in base16, nix32, base64 or SRI. Throws FormatError naming the
/// attribute on a bad mode, unknown algorithm or malformed hash.
DerivationOutput makeFixedOutput(std::string_view outputHash,
                                 std::string_view outputHashAlgo,
                                 std::string_view outputHashMode = "flat");

/// The output path a fixed output tuple implies for derivation `drvName`.
/// Throws FormatError if the tuple is not a valid fixed output.
StorePath fixedOutputPath(const StoreDir& storeDir, std::string_view drvName,
                          const DerivationOutput& out);

namespace detail {
/// inputDrvs after hashDerivationModulo: SHA-256 -> output names. Raw
/// digests sort as their base16 text does (printed only in the ATerm).
using InputHashes =
    boost::container::flat_map<std::array<uint8_t, 32>, std::set<std::string>>;
}  // namespace detail

/// Loads the derivation stored at a `.drv` path. Throws (kiln::Error) if it
/// is missing or malformed; Derivation::name must be set.
using DrvLoader = std::function<Derivation(const StorePath& drvPath)>;

/// A loader reading `<physicalDir>/<base name>` with readDerivationFile.
DrvLoader fileDrvLoader(const StoreDir& storeDir, std::string physicalDir);

/// hashDerivationModulo (spec §3.4) with input derivations loaded through a
/// DrvLoader and memoised, so a graph is loaded and hashed once per `.drv`.
/// Graph traversal is iterative (deep chains do not exhaust the stack).
/// Not thread-safe: use one cache per thread or guard it externally.
class DrvHashCache {
 public:
  DrvHashCache(StoreDir storeDir, DrvLoader loader);
  DrvHashCache(DrvHashCache&&) = default;
  DrvHashCache(const DrvHashCache&) = delete;
  DrvHashCache& operator=(const DrvHashCache&) = delete;

  /// What tagOf() holds for a `.drv` nobody has tagged.
  static constexpr uint32_t kNoTag = UINT32_MAX;

  /// H of the derivation stored at `drvPath` (unmasked, as dependants use
  /// it). Throws what the loader throws, or FormatError on a dependency
  /// cycle or an invalid derivation.
  Hash hashOf(const StorePath& drvPath);

  /// Whether the outputs of the derivation at `drvPath` are unknown until
  /// it is built: it is floating content-addressed or deferred, or depends
  /// on one that is (experimental ca-derivations). Throws as hashOf().
  bool isDeferred(const StorePath& drvPath);

  /// H(drv): for fixed-output derivations the hash of
  /// "fixed:out:<algo>:<hex>:<path>"; otherwise sha256 of the ATerm with
  /// inputDrvs replaced by their hashes (merged) and, with `maskOutputs`,
  /// output paths masked.
  Hash hashModulo(const Derivation& drv, bool maskOutputs);

  /// The store directory used for printing and paths.
  const StoreDir& storeDir() const { return storeDir_; }
  /// Memoises H of a derivation already in hand (one an evaluator has just
  /// made and named `drvPath`), so that dependants never load it. Its
  /// inputs are hashed (loaded if needed) first.
  void remember(const StorePath& drvPath, const Derivation& drv);
  /// For a derivation an evaluator has just made (outputs without paths):
  /// fills in its outputs as fillOutputPaths() does, prints its ATerm into
  /// `aterm`, memoises its H and returns its `.drv` path. Inputs are looked
  /// up once and each ATerm variant (masked, unmasked modulo, the `.drv`
  /// text) is hashed once; the unmasked modulo one is the `.drv` text with
  /// its inputs list replaced, not printed again. Throws as
  /// fillOutputPaths().
  /// With `tag`, also points it at the derivation's tag (see tagOf()) and,
  /// with `key`, sets that to the memo's key for it (see keptKey()): no
  /// second lookup. With `inputTags`, fills it with the tags of its
  /// inputDrvs, in order.
  /// With `memoMutex`, holds it only while reading and adding to the memo:
  /// threads holding it around every other use of this cache may then add
  /// derivations at once (the ATerms are printed and hashed unlocked).
  StorePath addDerivation(Derivation& drv, std::string& aterm,
                          uint32_t** tag = nullptr,
                          std::vector<uint32_t>* inputTags = nullptr,
                          SpinMutex* memoMutex = nullptr,
                          std::string_view* key = nullptr);
  /// A number the caller may attach to a memoised `.drv` (an evaluator
  /// keeps the index of its own record there, so one lookup finds both),
  /// kNoTag until set; nullptr if `baseName` has no memoised hash. Valid
  /// as long as the cache.
  uint32_t* tagOf(std::string_view baseName) {
    auto* it = memo_.find(baseName);
    return it ? &it->value.tag : nullptr;
  }
  /// Whether the `.drv` named `baseName` had its outputs computed here
  /// (addDerivation) or verified (checkDerivationOutputs): its outputs are
  /// the ones its contents imply. The store trusts such a `.drv`.
  bool outputsChecked(std::string_view baseName) const {
    auto* it = memo_.find(baseName);
    return it && it->value.checked;
  }
  /// Copies a `.drv` base name for the memo to keep as a key: the copy
  /// must stay valid, unchanged, as long as the cache.
  using KeyKeeper = std::function<std::string_view(std::string_view baseName)>;
  /// Memo keys made from now on are copied by `keeper` instead of into the
  /// cache's own chunks (an evaluator keeps them inside text it needs
  /// anyway: one copy of each base name instead of two).
  void keepKeysWith(KeyKeeper keeper) { keeper_ = std::move(keeper); }
  /// The memo's own copy of `baseName` (as keepKey made it); empty if it
  /// has no memoised hash. Held as tagOf.
  std::string_view keptKey(std::string_view baseName) const {
    auto* it = memo_.find(baseName);
    return it ? it->key : std::string_view();
  }
  /// How many times the loader was called (each `.drv` at most once).
  size_t loadCount() const { return loads_; }
  /// Number of memoised hashes.
  size_t size() const { return memo_.size(); }

 private:
  friend void fillOutputPaths(Derivation& drv, DrvHashCache& cache);
  friend void checkDerivationOutputs(DrvHashCache& cache,
                                     const StorePath& drvPath,
                                     const Derivation& drv);
  /// H is always SHA-256: only its 32 bytes are kept (100,000s of entries).
  struct Entry {
    std::array<uint8_t, 32> sha256;
    bool deferred;
    bool checked = false;  ///< outputs computed or verified here
    uint32_t tag = kNoTag;
    Hash hash() const {
      return Hash(HashAlgo::kSha256,
                  std::string_view(reinterpret_cast<const char*>(sha256.data()),
                                   sha256.size()));
    }
  };
  const Entry& entry(const StorePath& drvPath);
  Entry computeEntry(const Derivation& drv);
  /// With `aterm` (the derivation's `.drv` ATerm, its inputs list at
  /// `inputsSpan`), the ATerm hashed is that one with the list of input
  /// hashes in place of the inputs (not printed again), and a fixed
  /// output's path is the one fillOutputs just set (not computed again);
  /// `inputsText`, when not empty, is the printed list of `inputs`' hashes
  /// (fillOutputs' masked ATerm has it), not printed again.
  Entry entryOf(const Derivation& drv, const detail::InputHashes& inputs,
                bool inputDeferred, std::string_view aterm = {},
                std::pair<size_t, size_t> inputsSpan = {},
                std::string_view inputsText = {});
  detail::InputHashes inputHashes(const Derivation& drv, bool& deferred,
                                  std::vector<uint32_t>* tags = nullptr);
  /// Sets drv's output paths and their variables; with `aterm`, appends
  /// drv's `.drv` ATerm then and sets `inputsSpan` to its inputs list;
  /// with `inputsText`, sets it to the list of input hashes in the masked
  /// ATerm it printed (valid until this thread's next fillOutputs), or
  /// leaves it empty when it printed none (fixed or floating outputs).
  void fillOutputs(Derivation& drv, const detail::InputHashes& inputs,
                   bool inputDeferred, std::string* aterm = nullptr,
                   std::pair<size_t, size_t>* inputsSpan = nullptr,
                   std::string_view* inputsText = nullptr);
  Hash computeHash(const Derivation& drv, DerivationType type,
                   bool maskOutputs, const detail::InputHashes& inputs);

  StoreDir storeDir_;
  DrvLoader loader_;
  /// Copies a base name into keyChunks_ (memo_ keys are views of these:
  /// no heap string per entry, and one cache miss less per lookup).
  std::string_view keepKey(std::string_view baseName);
  /// Inserts H of the `.drv` named `baseName`, which is not memoised yet.
  Entry& memoise(std::string_view baseName, const Entry& e);

  /// By `.drv` base name; a hash map (lookups per input per derivation
  /// dominated evaluation with an ordered map of StorePaths), open
  /// addressing (a node map's lookup read three cache lines); entries
  /// never move (tagOf's pointers are held across other threads' adds).
  BaseNameMap<Entry> memo_;
  std::vector<std::unique_ptr<char[]>> keyChunks_;
  KeyKeeper keeper_;  // when set, keepKey's copies are made by it
  char* keyCur_ = nullptr;
  size_t keyLeft_ = 0;
  size_t loads_ = 0;
};

/// The ATerm used for hashing: `drv` with inputDrvs replaced by the base16
/// hashes of its inputs (equal hashes merged) and outputs masked when asked.
std::string printModuloAterm(DrvHashCache& cache, const Derivation& drv,
                             bool maskOutputs);

/// The `.drv` path: a text path named `<name>.drv` of the printed ATerm,
/// with references inputSrcs ∪ inputDrvs (spec §3.5 step 5).
StorePath derivationPath(const StoreDir& storeDir, const Derivation& drv);

/// Fills in the output paths and the env entries named after outputs of a
/// derivation whose outputs have no paths yet, exactly as Nix's
/// `derivation` builtin does (spec §3.5): fixed-output paths come from
/// their hash, floating outputs get their placeholder in env, and
/// input-addressed paths from H(masked), unless an input is deferred
/// (depends on a floating output), in which case the outputs stay deferred
/// (no path, env entry ""). Inputs are hashed through `cache`.
/// Throws FormatError for an invalid name or output set.
void fillOutputPaths(Derivation& drv, DrvHashCache& cache);

/// `/<nix32(sha256("nix-output:<output>"))>`: what env holds for a floating
/// content-addressed output.
std::string hashPlaceholder(std::string_view outputName);

/// Checks a derivation name: a valid store path name that does not end in
/// ".drv" and leaves room for the ".drv" suffix. Throws FormatError.
void checkDerivationName(std::string_view name);

/// Checks that the output paths (and the env entries named after outputs)
/// of `drv`, stored at `drvPath`, are the ones its contents imply, as Nix
/// does when it registers a `.drv`: input-addressed outputs from
/// hashDerivationModulo of the masked record (inputs hashed through
/// `cache`), the fixed output from its declared hash, floating outputs
/// from their placeholders; deferred ones (no path) must have inputs that
/// are deferred too. On success memoises H of `drv` in `cache` and marks it
/// checked (DrvHashCache::outputsChecked). Throws FormatError
/// "derivation '<drv>' has incorrect output '<path>', should be '<path>'"
/// (or names the env entry), and what `cache` throws for inputs.
void checkDerivationOutputs(DrvHashCache& cache, const StorePath& drvPath,
                            const Derivation& drv);

/// Checks a `.drv` file as the store registers it: `drvPath` is the text
/// path of `contents` and `references` (so the path pins the bytes),
/// `contents` parses (the name comes from `drvPath`), the references are
/// exactly its inputSrcs and inputDrvs, and its outputs pass
/// checkDerivationOutputs. Returns the parsed record. Throws FormatError
/// naming `drvPath` and the problem.
Derivation checkDerivationFile(DrvHashCache& cache, const StorePath& drvPath,
                               std::string_view contents,
                               const StorePathSet& references);

/// The `nix show-derivation` JSON of the derivations given (keyed by their
/// full `.drv` path, sorted), pretty-printed as Nix 2.8 prints it
/// (two-space indent, trailing newline). Strings are escaped as Nix does:
/// `"`, `\`, LF, CR, TAB by name, other bytes below 0x20 as \u00XX, every
/// other byte raw.
std::string showDerivationJson(const StoreDir& storeDir,
                               const std::map<StorePath, Derivation>& drvs);

}  // namespace kiln::store
