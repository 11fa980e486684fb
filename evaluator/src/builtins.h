#pragma once
// Builtin registration. Each family of builtins lives in its own
// builtins_<family>.cc and exposes one register function listed in
// KILN_BUILTIN_FAMILIES; adding a family is a new file plus one entry here.

#include <functional>
#include <mutex>
#include <optional>
#include <span>

#include "eval_parts.h"
#include "eval_services.h"
#include "kiln/common/hash.h"
#include "kiln/common/spin_mutex.h"
#include "kiln/evaluator/eval_state.h"
#include "kiln/evaluator/output.h"

namespace kiln::eval {

/// One builtin: its registered name ("__sub" is `builtins.sub` only,
/// "map" is also global), its arity and implementation.
struct BuiltinDef {
  const char* name;
  uint32_t arity;
  PrimOpFn fn;
};

#define KILN_BUILTIN_FAMILIES(X) \
  X(Arith) X(Types) X(Strings) X(Lists) X(Attrs) X(Json) X(Fs) X(Env) X(Errors) \
  X(Context) X(Hash) X(Regex) X(Xml) X(Toml) X(Derivation) X(Fetch)

#define KILN_DECLARE_FAMILY(f) void register##f##Builtins(EvalState& state);
KILN_BUILTIN_FAMILIES(KILN_DECLARE_FAMILY)
/// Makes what builtins create on first use (the derivation family's
/// state) before threads evaluate (EvalState::beginThreads).
void prepareBuiltinsForThreads(EvalState& state);
#undef KILN_DECLARE_FAMILY

/// Registers every entry of `defs`.
inline void addBuiltins(EvalState& state, std::span<const BuiltinDef> defs) {
  for (auto& d : defs) state.builtins().addPrimOp(d.name, d.arity, d.fn);
}

/// Whether `v` is the native `derivation` builtin. Nix's is the lambda
/// `{ outputs ? [ "out" ], ... }: …` of derivation.nix, so functionArgs
/// and printing treat this one as that lambda.
bool isDerivationBuiltin(const Value& v);

/// The path a builtin reads (import, readFile, readDir, hashFile…): `v`
/// coerced to an absolute path, canonicalised and, if `check`, allowed by
/// restricted evaluation (EvalState::checkSourcePath, symlinks then
/// resolved). Errors get Nix's "while realising the context of …" trace.
std::string realisePath(EvalState& st, PosIdx pos, Value& v, bool check = true);

/// Decides whether a path (and its type: "regular", "directory",
/// "symlink", "unknown") goes into a source path (builtins.filterSource).
using NarFilter = PathFilter;
/// Serialises `path` as a NAR into a SHA-256 hash (for source paths);
/// entries the filter rejects are left out.
Hash narHashOfPath(const std::string& path, const NarFilter& filter = {});

/// A lock on the derivation hash memo when threads evaluate (none
/// otherwise): held around a store write the writer may check against the
/// memo (a text file named `*.drv`), as derivation recording holds it.
std::unique_lock<SpinMutex> lockDerivationMemo(EvalState& st);
}  // namespace kiln::eval
