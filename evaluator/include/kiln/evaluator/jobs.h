#pragma once
/// Job enumeration for the scheduler: walks an evaluated collection the way
/// Hydra does and describes every derivation found (or the error that kept
/// it from evaluating). One failing job never stops the others.

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {

/// One job: a derivation reached from the root, or the error raised while
/// evaluating the attribute that should have been one.
struct Job {
  std::string attr;    ///< dotted attribute path from the root ("" for the root)
  std::string error;   ///< non-empty when this job failed; other fields then empty
  std::string name;    ///< the derivation's `name`
  std::string system;  ///< the derivation's `system`
  std::string drvPath;
  /// Output name → output path, in the derivation's `outputs` order.
  std::vector<std::pair<std::string, std::string>> outputs;
  /// `meta` attributes that exist and convert to JSON: name → JSON text,
  /// sorted by name.
  std::vector<std::pair<std::string, std::string>> meta;
  /// With JobWalkOptions::constituents, for a derivation with
  /// `_hydraAggregate = true` (Hydra's aggregate job): the `.drv` paths of
  /// the derivations in its `constituents` list, in path order...
  std::vector<std::string> constituents;
  /// ...and the strings in it, names of other jobs (resolved to their
  /// `.drv` paths once every job is known: the caller's part).
  std::vector<std::string> namedConstituents;
  bool aggregate = false;  ///< `_hydraAggregate = true` was seen
};

/// How a job walk treats what it finds (nix-eval-jobs' options).
struct JobWalkOptions {
  /// Enter every attribute set below the top level, not only those with
  /// `recurseForDerivations = true` (`--force-recurse`).
  bool forceRecurse = false;
  /// Read aggregate jobs' `constituents` (`--constituents`); an aggregate
  /// without the attribute is that job's error.
  bool constituents = false;
};

/// Enumerates the jobs in `root` (already selected with -A, if any) and
/// calls `onJob` for each, in attribute-name order. A derivation is a job;
/// attribute sets are entered at the top level and, below it, only when
/// they have `recurseForDerivations = true`; other values are ignored.
/// Functions are called with `autoArgs`. Errors inside one attribute are
/// reported as that job's `error`; only an error evaluating `root` itself
/// (or one that is not a set or derivation) is thrown, as EvalError.
void enumerateJobs(EvalState& state, Value& root, Bindings* autoArgs, const std::string& rootAttr,
                   const std::function<void(const Job&)>& onJob);

/// The root of a job walk, auto-called and forced: one derivation, or a set
/// whose attributes are walked one by one (enumerateJobEntry), which lets
/// worker processes forked after this point share the work.
struct JobRoot {
  Value value;                       ///< the root, forced
  bool isDerivation = false;         ///< the root is itself the only job
  std::vector<const Attr*> entries;  ///< top-level attributes, in name order
  JobWalkOptions options;            ///< for every walk below this root
};

/// Auto-calls and forces `root` as enumerateJobs does; throws EvalError when
/// it fails or is neither a set nor a derivation. The entries point into
/// `state`'s memory.
JobRoot prepareJobRoot(EvalState& state, Value& root, Bindings* autoArgs,
                       const JobWalkOptions& options = {});

/// Calls `onJob` for the jobs below entry `index` of `root` (or, for a
/// derivation root, for the root itself), in attribute-name order; errors
/// are reported per job as in enumerateJobs.
void enumerateJobEntry(EvalState& state, const JobRoot& root, size_t index, Bindings* autoArgs,
                       const std::string& rootAttr, const std::function<void(const Job&)>& onJob);

/// The attributes, in name order, of entry `index` of a set `root` when
/// that entry is a set the walk enters (not a derivation, with
/// `recurseForDerivations = true`: a package scope such as
/// `pythonPackages`); empty otherwise, and when forcing the entry fails
/// (enumerateJobEntry then reports the error). Walking each of them with
/// enumerateJobSubEntry, in order, gives enumerateJobEntry's calls, so
/// threads can share one large entry.
std::vector<const Attr*> jobEntrySubEntries(EvalState& state, const JobRoot& root, size_t index,
                                            Bindings* autoArgs);

/// Calls `onJob` for the jobs below `attr`, an attribute of the entered
/// set at `prefix` (the entry's jobEntryAttr) of `root`, as
/// enumerateJobEntry would.
void enumerateJobSubEntry(EvalState& state, const JobRoot& root, const Attr& attr,
                          const std::string& prefix, Bindings* autoArgs,
                          const std::function<void(const Job&)>& onJob);

/// The dotted attribute path of entry `index` of `root` (`rootAttr` itself
/// for a derivation root).
std::string jobEntryAttr(EvalState& state, const JobRoot& root, size_t index,
                         const std::string& rootAttr);

/// The job as one JSON object (no trailing newline): {"attr", "name",
/// "system", "drvPath", "outputs": {...}, "meta": {...}} or {"attr", "error"};
/// an aggregate (Job::aggregate) also has "constituents" and
/// "namedConstituents".
std::string jobToJson(const Job& job);

}  // namespace kiln::eval
