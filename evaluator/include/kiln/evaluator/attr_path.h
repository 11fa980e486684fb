#pragma once
/// Attribute-path selection (`-A a.b.0`) and derivation discovery, as
/// nix-instantiate does them.

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {

/// Follows `path` ("a.b", "a.\"x.y\"", numeric components index lists)
/// from `root`, calling functions with `autoArgs` at each step. Throws
/// EvalError naming the missing component.
Value* findAlongAttrPath(EvalState& state, const std::string& path, Bindings* autoArgs, Value& root);

/// What nix-instantiate prints for `v`: the `.drv` path of each derivation
/// value in it, once per value, with `!<output>` when its outputName is not
/// "out": `v` itself if a derivation; the attributes of a set (nested sets
/// only with recurseForDerivations, lists inside sets skipped); the
/// elements of a list (each treated like `v`). Throws EvalError if `v` or a
/// list element is none of these.
struct CollectedDrv {
  /// Copies: a value's strings may be collected once nothing refers to it.
  std::string drvPath;
  std::string output;  ///< the outputName, empty when it is "out"
};
std::vector<CollectedDrv> collectDerivations(EvalState& state, Value& v, Bindings* autoArgs);

/// collectDerivations without the copies: once the walk is done (nothing
/// is reported if it throws), calls `found` for each derivation in order
/// with views of its value's strings, which the walk's traced set of the
/// derivations seen keeps alive until it returns (a copy each was ~190
/// bytes of malloc a derivation at exit: docs/evaluator.md).
void forEachDerivation(EvalState& state, Value& v, Bindings* autoArgs,
                       const std::function<void(std::string_view drvPath, std::string_view output)>& found);

}  // namespace kiln::eval
