// Fetchers and store paths: fetchurl, fetchTarball, fetchGit,
// fetchMercurial, fetchTree, storePath. kiln's evaluator never downloads
// (sources are fetched by fixed-output derivations, e.g.
// <nix/fetchurl.nix>, which workers build); a fetcher call fails, after
// the restricted-mode URI check Nix makes first.
#include "builtins.h"
#include "kiln/store/store_path.h"

namespace kiln::eval {

namespace {

// The URL a fetcher was given: a string, or a set's `url` attribute.
std::string fetcherUrl(EvalState& st, PosIdx pos, Value& arg, const char* who) {
  st.forceValue(arg, pos);
  if (arg.type != VType::kAttrs)
    return std::string(forceStringNoCtx(st, arg, pos));
  Value* url = arg.attrs->get(st.sym("url"));
  if (!url)
    throwError(st, pos, std::string("'url' argument required by '") + who + "'");
  return std::string(forceStringNoCtx(st, *url, pos));
}

// Whether the fetcher's argument is a set with attribute `name`.
bool hasAttr(EvalState& st, Value& arg, const char* name) {
  return arg.type == VType::kAttrs && arg.attrs->get(st.sym(name));
}

// Pure evaluation's refusals, as Nix 2.8 words them: fetchurl and
// fetchTarball need a `sha256`, the tree fetchers a locked input (`rev`).
void checkPureFetch(EvalState& st, PosIdx pos, Value& arg, const char* who) {
  if (!st.settings.pureEval) return;
  std::string_view w = who;
  if ((w == "fetchurl" || w == "fetchTarball") && !hasAttr(st, arg, "sha256"))
    throw EvalError("in pure evaluation mode, '" + std::string(who) +
                    "' requires a 'sha256' argument");
  if ((w == "fetchGit" || w == "fetchTree") && !hasAttr(st, arg, "rev"))
    throw EvalError("in pure evaluation mode, 'fetchTree' requires a locked input, at " +
                    st.positions.show(pos));
  if (w == "fetchMercurial" && !hasAttr(st, arg, "rev"))
    throw EvalError("in pure evaluation mode, 'fetchMercurial' requires a Mercurial revision");
}

[[noreturn]] void refuseFetch(EvalState& st, PosIdx pos, Value& arg,
                              const char* who) {
  std::string url = fetcherUrl(st, pos, arg, who);
  st.checkUri(url);
  checkPureFetch(st, pos, arg, who);
  throwError(st, 
      pos,
      std::string("'builtins.") + who + "' of '" + url +
          "': kiln's evaluator does not download; fetch it in a fixed-output "
          "derivation instead (e.g. import <nix/fetchurl.nix> { url; sha256; "
          "})");
}

void primFetchurl(EvalState& st, PosIdx pos, Value** args, Value&) {
  refuseFetch(st, pos, *args[0], "fetchurl");
}
void primFetchTarball(EvalState& st, PosIdx pos, Value** args, Value&) {
  refuseFetch(st, pos, *args[0], "fetchTarball");
}
void primFetchGit(EvalState& st, PosIdx pos, Value** args, Value&) {
  refuseFetch(st, pos, *args[0], "fetchGit");
}
void primFetchMercurial(EvalState& st, PosIdx pos, Value** args, Value&) {
  refuseFetch(st, pos, *args[0], "fetchMercurial");
}
void primFetchTree(EvalState& st, PosIdx pos, Value** args, Value&) {
  refuseFetch(st, pos, *args[0], "fetchTree");
}

// builtins.storePath: a path inside the store directory as a string whose
// context is its store object. In restricted mode only allowed paths (as
// in Nix: not arbitrary store objects). The object is not checked to be
// valid (kiln's evaluator has no store to ask).
void primStorePath(EvalState& st, PosIdx pos, Value** args, Value& v) {
  if (st.settings.pureEval)
    throwError(st, pos, "'builtins.storePath' is not allowed in pure evaluation mode");
  Context ignored;
  std::string path =
      st.checkSourcePath(coerceToPath(st, pos, *args[0], ignored));
  const std::string& dir = st.settings.storeDir;
  if (!path.starts_with(dir + "/") || path.size() == dir.size() + 1)
    throwError(st, pos, "path '" + path + "' is not in the Nix store");
  size_t end = path.find('/', dir.size() + 1);
  std::string object = path.substr(0, end);
  try {
    store::StoreDir(dir).parsePath(object);
  } catch (const FormatError& e) {
    throwError(st, pos, e.what());
  }
  Context ctx;
  addContext(st, ctx, object);
  st.mkString(v, path, ctx);
}

constexpr BuiltinDef kDefs[] = {
    {"__fetchurl", 1, primFetchurl}, {"fetchTarball", 1, primFetchTarball},
    {"fetchGit", 1, primFetchGit},   {"fetchMercurial", 1, primFetchMercurial},
    {"fetchTree", 1, primFetchTree}, {"__storePath", 1, primStorePath},
};

}  // namespace

void registerFetchBuiltins(EvalState& state) { addBuiltins(state, kDefs); }

}  // namespace kiln::eval
