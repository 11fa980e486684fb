// Hashing builtins: hashString and hashFile.
#include "builtins.h"
#include "kiln/common/file.h"

namespace kiln::eval {

namespace {

HashAlgo parseAlgo(EvalState& st, PosIdx pos, Value& v) {
  std::string_view name = forceStringNoCtx(st, v, pos);
  auto algo = parseHashAlgo(name);
  if (!algo) throwError(st, pos, "unknown hash type '" + std::string(name) + "'");
  return *algo;
}

void primHashString(EvalState& st, PosIdx pos, Value** args, Value& v) {
  HashAlgo algo = parseAlgo(st, pos, *args[0]);
  Context ctx;
  std::string_view s = forceString(st, *args[1], ctx, pos);
  st.mkString(v, hashString(algo, s).toHex());
}

void primHashFile(EvalState& st, PosIdx pos, Value** args, Value& v) {
  HashAlgo algo = parseAlgo(st, pos, *args[0]);
  std::string path = realisePath(st, pos, *args[1]);
  std::string data;
  try {
    data = kiln::readFile(path);
  } catch (const Error& e) {
    throwError(st, pos, e.what());
  }
  st.mkString(v, hashString(algo, data).toHex());
}

constexpr BuiltinDef kDefs[] = {
    {"__hashString", 2, primHashString},
    {"__hashFile", 2, primHashFile},
};

}  // namespace

void registerHashBuiltins(EvalState& state) { addBuiltins(state, kDefs); }

}  // namespace kiln::eval
