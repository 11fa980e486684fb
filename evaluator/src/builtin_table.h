#pragma once
// EvalState's builtins table: the builtins and constants registered by
// each family (builtins.h), the `builtins` set, the base environment every
// file is evaluated in, and the builtin families' own state.
// Evaluator-internal: EvalState::builtins().

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/evaluator/ast.h"
#include "kiln/evaluator/value.h"

namespace kiln::eval {

class EvalState;

/// Per-evaluation state a builtin family keeps (e.g. derivations made so far).
struct BuiltinState {
  virtual ~BuiltinState() = default;
};

/// The builtins of one EvalState. Filled while the state is constructed
/// (add*, then finish); read-only afterwards.
class BuiltinTable {
 public:
  explicit BuiltinTable(EvalState& state);
  ~BuiltinTable();
  BuiltinTable(const BuiltinTable&) = delete;
  BuiltinTable& operator=(const BuiltinTable&) = delete;

  /// Registers a builtin; names starting with "__" appear without the
  /// prefix in `builtins`, others are also visible at top level.
  void addPrimOp(const char* name, uint32_t arity, PrimOpFn fn);
  /// Registers a constant (a later one of the same name replaces it).
  void addConstant(const std::string& name, Value* v);
  /// Makes the `builtins` set (holding every builtin and itself) and the
  /// base environment from what was registered. Once, last.
  void finish();
  /// `builtins.<name>`, or nullptr.
  Value* lookup(std::string_view name);
  /// The environment of every file's top level (finish made it).
  Env* baseEnv() const { return baseEnv_; }
  /// Its static counterpart, for binding variables while parsing.
  const StaticEnv& staticBaseEnv() const { return staticBaseEnv_; }
  /// The derivation family's state (created on first use).
  std::unique_ptr<BuiltinState>& derivationState() { return derivationState_; }

 private:
  EvalState& state_;
  std::vector<std::pair<Symbol, Value*>> globals_;
  std::vector<std::pair<Symbol, Value*>> builtinAttrs_;
  Env* baseEnv_ = nullptr;
  StaticEnv staticBaseEnv_;
  Value* vBuiltins_ = nullptr;
  std::unique_ptr<BuiltinState> derivationState_;
};

}  // namespace kiln::eval
