#pragma once
/// The flags nix-instantiate 2.8 takes from Nix's common argument parser
/// (LegacyArgs, MixCommonArgs, MixEvalArgs and one `--NAME` per nix.conf
/// setting), parsed the way Nix parses them, for `kiln instantiate`.
/// docs/evaluator.md lists which act and which are accepted without effect.

#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/evaluator/eval_state.h"

namespace kiln::cli {

/// What the Nix flags asked for.
struct NixFlags {
  /// Settings by canonical name (aliases resolved): from --option NAME
  /// VALUE, --NAME VALUE, --NAME / --no-NAME (booleans, "true"/"false"),
  /// --cores, -j, ...
  std::map<std::string, std::string> settings;
  /// --extra-NAME VALUE and --option extra-NAME VALUE (list settings):
  /// appended, space-separated, to the setting's value or default.
  std::map<std::string, std::string> extras;
  bool version = false;    ///< --version
  bool findFile = false;   ///< --find-file
  bool dryRun = false;     ///< --dry-run (read-only, as in Nix)
  bool evalOnly = false;   ///< --eval-only (= --eval)
  bool parseOnly = false;  ///< --parse-only (= --parse)
  bool noGcWarning = false;
  /// Nix's log level: 3 (info) by default; -v/--verbose add one, --quiet
  /// takes one (not below 0), --debug sets 6. kiln prints what Nix prints
  /// at 5 (chatty, -vv): "instantiated 'NAME' -> 'DRV'".
  int verbosity = 3;
  /// "unknown setting" warnings, printed after parsing (as Nix does).
  std::vector<std::string>
      unknownSettings;  ///< --no-gc-warning (no "did not specify '--add-root'")
};

/// Expands compound short flags as Nix does: "-vvv" → "-v" "-v" "-v",
/// "-j4" → "-j" "4", "-vj3" → "-v" "-j" "3".
std::vector<std::string> expandShortFlags(const std::vector<std::string>& in);

/// Removes the flags of Nix's common parser from `in` into `out`; returns
/// the rest in order (after "--", every argument is left to the caller,
/// as nix-instantiate's own parser still sees them). `takesValue(flag)` names
/// kiln's own flags whose next argument is a value (it is passed through
/// untouched). Unknown settings and invalid values given with --option are
/// warned about on `warn`, as Nix does; an invalid value given as --NAME VALUE,
/// --cores, -j ..., or a missing argument throws boost::program_options::error
/// with Nix's wording.
std::vector<std::string> takeNixFlags(
    const std::vector<std::string>& in, NixFlags& out,
    const std::function<bool(const std::string&)>& takesValue,
    std::ostream& warn);

/// Applies the settings kiln honours to `settings`: restrict-eval,
/// allowed-uris, system, nix-path (replaces NIX_PATH's entries, which
/// follow the first `includes` -I entries of settings.searchPath),
/// pure-eval. Sets `showTrace` from show-trace.
/// Returns the `store` setting mapped to a --store-root directory ("" for
/// kiln's own store). Throws Error for what kiln cannot honour, saying
/// what to do instead (a remote store URL).
std::string applyNixSettings(const NixFlags& flags,
                             eval::EvalSettings& settings, size_t includes,
                             bool& showTrace);

}  // namespace kiln::cli
