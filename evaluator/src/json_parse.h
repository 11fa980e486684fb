#pragma once
// builtins.fromJSON's direct parser (json_parse.cc).

#include <string_view>

#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {

/// Parses `text` into `v` as builtins.fromJSON does, straight into values,
/// when it is JSON that nlohmann::json::parse accepts without a byte order
/// mark; returns false otherwise (then `v` is untouched if `text` was not a
/// lone scalar, and the caller parses again with nlohmann for its error).
bool parseJsonFast(EvalState& st, std::string_view text, Value& v);

}  // namespace kiln::eval
