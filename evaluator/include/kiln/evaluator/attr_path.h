#pragma once
/// Attribute-path selection (`-A a.b.0`) and derivation discovery, as
/// nix-instantiate does them.

#include <string>
#include <vector>

#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {

/// Follows `path` ("a.b", "a.\"x.y\"", numeric components index lists)
/// from `root`, calling functions with `autoArgs` at each step. Throws
/// EvalError naming the missing component.
Value* findAlongAttrPath(EvalState& state, const std::string& path, Bindings* autoArgs, Value& root);

/// The `.drv` paths of the derivations in `v`: itself if a derivation,
/// the attributes of a set (nested sets only with recurseForDerivations),
/// the elements of a list.
std::vector<std::string> collectDerivations(EvalState& state, Value& v, Bindings* autoArgs);

}  // namespace kiln::eval
