#pragma once
/// Command-line plumbing shared by the evaluating commands (`kiln eval`,
/// `kiln instantiate`): --arg/--argstr pairs, NIX_PATH/NIX_STORE_DIR, the
/// automatic arguments passed to a top-level function and where store
/// objects are written.

#include <boost/program_options.hpp>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/evaluator/eval_state.h"
#include "store_cli.h"

namespace kiln::cli {

/// `--arg NAME EXPR` / `--argstr NAME VALUE` pairs, in command-line order.
struct AutoArgSpec {
  std::vector<std::pair<std::string, std::string>> args;     ///< NAME, Nix expression
  std::vector<std::pair<std::string, std::string>> argstrs;  ///< NAME, literal string
};

/// Removes the --arg/--argstr triples from `in` (Boost takes one value per
/// option) into `spec`; returns the rest. Throws
/// boost::program_options::error when a pair is incomplete.
std::vector<std::string> takeAutoArgs(const std::vector<std::string>& in, AutoArgSpec& spec);

/// Applies NIX_STORE_DIR and appends NIX_PATH's entries (after the -I ones
/// already in `settings.searchPath`), as nix-instantiate does.
void applyNixEnvironment(eval::EvalSettings& settings);

/// The automatic arguments (--arg values parsed relative to the current
/// directory, lazily evaluated); owned by `state`'s arena.
eval::Bindings* makeAutoArgs(eval::EvalState& state, const AutoArgSpec& spec);

/// The one EvalState of a command that exits when its evaluation is done:
/// deliberately never destroyed (nor its AST arena's objects registered
/// for destruction), because freeing a large evaluation object by object
/// costs several percent of the run, on one thread after any evaluation
/// threads have finished (Nix leaves its heap to exit likewise). A static
/// pointer keeps it reachable for leak checkers. Sets malloc up for a
/// process that keeps its memory to the end (large heap steps, nothing
/// given back; KILN_MALLOC_DEFAULTS=1 leaves glibc's defaults). Throws as
/// EvalState's constructor.
eval::EvalState& makeProcessEvalState(const eval::EvalSettings& settings);

/// Prints an evaluation error as nix-instantiate 2.8 does: `error: ` and
/// the message with its position and source lines; the "… while …" trace
/// lines only with `showTrace`, otherwise (if there were any) the hint
/// "(use '--show-trace' to show detailed location information)". A message
/// with no position of its own keeps trace lines up to the first with one
/// (except a restricted-mode refusal, which Nix too prints without any).
void printEvalError(std::ostream& out, const std::string& what, bool showTrace);

/// Where an evaluation writes its `.drv` files, toFile texts and sources:
/// kiln's LocalStore (default; `--state-dir`, `--store-dir`), a plain
/// directory (`--store-root DIR`) or nowhere (`--readonly-mode`).
class EvalStoreTarget {
 public:
  EvalStoreTarget();
  ~EvalStoreTarget();
  EvalStoreTarget(const EvalStoreTarget&) = delete;
  EvalStoreTarget& operator=(const EvalStoreTarget&) = delete;

  /// Adds --state-dir, --store-dir, --store-root, --readonly-mode and
  /// --read-write-mode to `opts`.
  void addOptions(boost::program_options::options_description& opts);
  /// After parsing: the logical store directory is --store-dir if given,
  /// else $NIX_STORE_DIR, else /nix/store. Sets `settings.storeDir` and
  /// `settings.readOnly` (call after applyNixEnvironment).
  void apply(const boost::program_options::variables_map& vm, eval::EvalSettings& settings);
  /// The writer for the evaluation (null in read-only mode). The LocalStore
  /// is opened on the first write, so evaluations that write nothing never
  /// touch the state directory. Owned by this object.
  eval::StoreWriter* writer();
  /// The LocalStore (opened now); null with --store-root or --readonly-mode.
  /// Throws Error if it cannot be opened.
  store::LocalStore* localStore();
  /// Whether --readonly-mode was given.
  bool readOnly() const { return readOnly_; }
  /// Writes nothing, as --readonly-mode (nix-instantiate's --dry-run).
  void setReadOnly() { readOnly_ = true; }
  /// Writes into the plain directory `dir`, as --store-root (Nix's
  /// --store local?root=DIR). Call before writer().
  void setStoreRoot(std::string dir) { storeRoot_ = std::move(dir); }
  /// Whether it writes into a plain directory (--store-root).
  bool storeRooted() const { return !storeRoot_.empty(); }
  /// Prints `text` to stdout once every store object added so far is
  /// durable and valid: at once when the LocalStore writer has nothing
  /// queued, else right after its next commit (flush() at the latest), so
  /// a line never names a `.drv` that a crash could still lose.
  void print(const std::string& text);
  /// Passes every text print() releases through `transform` (whole lines;
  /// runs when the text's `.drv` files are committed) before it is
  /// written. Null: unchanged.
  void setTransform(std::function<std::string(const std::string&)> transform) {
    transform_ = std::move(transform);
  }
  /// Writes released text to `sink` instead of stdout (null: stdout).
  void setSink(std::function<void(const std::string&)> sink) { sink_ = std::move(sink); }
  /// Commits what the writer has queued and prints what print() held.
  /// Throws Error when the commit fails (the held output is then dropped).
  void flush();
  /// In a process forked from the one that made this target: forgets the
  /// parent's store connection and writer without closing them (they stay
  /// the parent's) and drops held output, so that writer() and
  /// localStore() open this process's own.
  void detachAfterFork();
  /// flush(), then closes the writer and the store (releasing this
  /// process's temporary roots). Throws Error as flush() does.
  void close();

 private:
  class LazyWriter;
  /// Prints what print() held.
  void releaseHeld();
  StoreLocation location_;
  std::string storeRoot_;
  bool readOnly_ = false;
  std::unique_ptr<store::LocalStore> store_;
  std::unique_ptr<eval::StoreWriter> writer_;
  LazyWriter* lazy_ = nullptr;  // writer_ when it is the LocalStore's
  std::string held_;            // print()ed, waiting for a commit
  std::function<std::string(const std::string&)> transform_;
  std::function<void(const std::string&)> sink_;
};

}  // namespace kiln::cli
