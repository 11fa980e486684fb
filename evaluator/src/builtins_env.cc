// Environment builtins: getEnv and placeholder.
#include <cstdlib>

#include "builtins.h"
#include "kiln/common/encoding.h"

namespace kiln::eval {

namespace {

void primGetEnv(EvalState& st, PosIdx pos, Value** args, Value& v) {
  std::string name(forceStringNoCtx(st, *args[0], pos));
  // Restricted and pure evaluation see no environment (as in Nix).
  const char* val = st.settings.restrictsPaths() ? nullptr : std::getenv(name.c_str());
  st.mkString(v, val ? val : "");
}

void primPlaceholder(EvalState& st, PosIdx pos, Value** args, Value& v) {
  std::string out(forceStringNoCtx(st, *args[0], pos));
  st.mkString(v, "/" + hashString(HashAlgo::kSha256, "nix-output:" + out).to(HashFormat::kNix32, false));
}

constexpr BuiltinDef kDefs[] = {
    {"__getEnv", 1, primGetEnv},
    {"placeholder", 1, primPlaceholder},
};

}  // namespace

void registerEnvBuiltins(EvalState& state) { addBuiltins(state, kDefs); }

}  // namespace kiln::eval
