#pragma once
/// Command-line plumbing shared by the evaluating commands (`kiln eval`,
/// `kiln instantiate`): --arg/--argstr pairs, NIX_PATH/NIX_STORE_DIR and
/// the automatic arguments passed to a top-level function.

#include <string>
#include <utility>
#include <vector>

#include "kiln/evaluator/eval_state.h"

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

}  // namespace kiln::cli
