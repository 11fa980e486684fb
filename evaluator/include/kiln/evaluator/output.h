#pragma once
/// Printing evaluated values: Nix's own syntax (nix-instantiate --eval),
/// XML (--xml, builtins.toXML) and JSON (--json, builtins.toJSON).

#include <ostream>

#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {

/// Prints `v` as `nix-instantiate --eval` does: unevaluated parts as
/// <CODE>, shared sets/lists after their first occurrence as «repeated».
void printValue(EvalState& state, std::ostream& out, Value& v);

/// Prints `v` as Nix's XML; `location` adds source positions of lambdas.
void printValueAsXML(EvalState& state, bool strict, bool location, Value& v, std::ostream& out,
                     Context& ctx);

/// Appends `v` as JSON to `out`, as Nix 2.8's toJSON writes it; paths are
/// copied to the store when `copyToStore`.
void printValueAsJSON(EvalState& state, bool strict, Value& v, PosIdx pos, std::string& out,
                      Context& ctx, bool copyToStore = true);

/// Parses JSON text into a value; throws EvalError on malformed input.
void parseJSON(EvalState& state, std::string_view text, Value& v);

}  // namespace kiln::eval
