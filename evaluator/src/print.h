#pragma once
// Printing values and expressions in Nix's syntax.
#include <ostream>
#include <string_view>

#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {

/// `"…"` with Nix's escapes (\" \\ \n \r \t \${).
/// With `everyDollar` (expressions shown by --parse) every `$` is escaped.
void printString(std::ostream& out, std::string_view s, bool everyDollar = false);
/// An attribute name: bare if it is an identifier and not a keyword.
void printAttrName(std::ostream& out, std::string_view s);
/// Nix's float formatting (like printf("%g")).
std::string showFloat(double d);
/// Concatenates lists (the ++ operator and builtins.concatLists).
void concatLists(EvalState& state, Value& v, size_t n, Value** lists, PosIdx pos);

}  // namespace kiln::eval
