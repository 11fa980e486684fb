#pragma once
/// Evaluation and parse errors. Messages carry the position (file:line:col,
/// the source line and a caret) and a trace of enclosing evaluation steps.

#include <string>

#include "kiln/common/error.h"

namespace kiln::eval {

/// Any error raised while parsing or evaluating Nix code.
class EvalError : public Error {
 public:
  explicit EvalError(std::string msg) : Error(msg), text_(std::move(msg)) {}
  const char* what() const noexcept override { return text_.c_str(); }
  /// Appends a "… while …" line (innermost first).
  void addTrace(const std::string& line) { text_ += "\n\n       … " + line; }
  /// The message without traces is not kept separately; callers print what().

 private:
  std::string text_;
};

/// Syntax errors and unbound variables found before evaluation.
class ParseError : public EvalError { using EvalError::EvalError; };
/// A failed `assert`; catchable by builtins.tryEval.
class AssertionError : public EvalError { using EvalError::EvalError; };
/// `throw`; catchable by builtins.tryEval.
class ThrownError : public AssertionError { using AssertionError::AssertionError; };
/// `abort`: never caught by tryEval.
class AbortError : public EvalError { using EvalError::EvalError; };
/// Restricted evaluation refused a path or URI (Nix's RestrictedPathError).
class RestrictedPathError : public EvalError { using EvalError::EvalError; };
/// A value that depends on itself, or the call depth limit was exceeded.
class InfiniteRecursionError : public EvalError { using EvalError::EvalError; };

}  // namespace kiln::eval
