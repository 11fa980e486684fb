#include "kiln/worker/build_env.h"

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kiln/common/error.h"
#include "kiln/common/hash.h"

namespace kiln::worker {

namespace {

using nlohmann::json;

/// Splits on runs of whitespace, as Nix tokenises `passAsFile` and
/// `impureEnvVars`.
std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

/// Defaults the derivation's own attributes may override (as in Nix 2.8).
void addDefaultVariables(std::map<std::string, std::string>& env,
                         const BuildEnvContext& ctx) {
  env["PATH"] = "/path-not-set";
  env["HOME"] = "/homeless-shelter";
  env["NIX_STORE"] = ctx.storeDir;
  env["NIX_BUILD_CORES"] = std::to_string(ctx.buildCores);
}

/// The build directory variables, which always win.
void addBuildDirVariables(std::map<std::string, std::string>& env,
                          const BuildEnvContext& ctx) {
  env["NIX_BUILD_TOP"] = ctx.buildDir;
  for (const char* v : {"TMPDIR", "TEMPDIR", "TMP", "TEMP"})
    env[v] = ctx.buildDir;
}

/// Exports the derivation's env, turning `passAsFile` attributes into files.
void addDerivationVariables(const store::Derivation& drv, BuildEnvironment& out,
                            const BuildEnvContext& ctx) {
  std::set<std::string> asFile;
  if (auto i = drv.env.find("passAsFile"); i != drv.env.end())
    for (auto& w : words(i->second)) asFile.insert(w);
  for (auto& [name, value] : drv.env) {
    if (!asFile.count(name)) {
      out.env[name] = value;
      continue;
    }
    auto file =
        ".attr-" +
        hashString(HashAlgo::kSha256, name).to(HashFormat::kNix32, false);
    out.files[file] = value;
    out.env[name + "Path"] = ctx.buildDir + "/" + file;
  }
}

/// Writes `.attrs.json` / `.attrs.sh` for a structured-attrs derivation.
void addStructuredAttrs(const store::StoreDir& storeDir,
                        const store::Derivation& drv, const std::string& text,
                        BuildEnvironment& out, const BuildEnvContext& ctx) {
  json attrs;
  try {
    attrs = json::parse(text);
  } catch (const json::exception& e) {
    throw FormatError("derivation '" + drv.name +
                      "': __json is not valid JSON: " + e.what());
  }
  if (!attrs.is_object())
    throw FormatError("derivation '" + drv.name +
                      "': __json is not a JSON object");
  json outputs = json::object();
  for (auto& [name, o] : drv.outputs)
    outputs[name] = o.path ? storeDir.printPath(*o.path) : std::string();
  attrs["outputs"] = outputs;
  auto dumped = attrs.dump(-1, ' ', false, json::error_handler_t::replace);
  out.files[".attrs.json"] = dumped;
  out.files[".attrs.sh"] = structuredAttrsToShell(dumped);
  out.env["NIX_ATTRS_JSON_FILE"] = ctx.buildDir + "/.attrs.json";
  out.env["NIX_ATTRS_SH_FILE"] = ctx.buildDir + "/.attrs.sh";
}

std::string shellQuote(const std::string& s) {
  std::string r = "'";
  for (char c : s) {
    if (c == '\'')
      r += "'\\''";
    else
      r += c;
  }
  return r + "'";
}

/// A scalar in `.attrs.sh` form; nullopt for values Nix leaves out
/// (floats, lists, objects).
std::optional<std::string> shellScalar(const json& v) {
  if (v.is_string()) return shellQuote(v.get<std::string>());
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_boolean()) return v.get<bool>() ? "1" : "";
  if (v.is_null()) return "''";
  return std::nullopt;
}

bool isShellIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

/// One `declare` line, or nullopt if the value has no shell form.
std::optional<std::string> shellDeclaration(const std::string& name,
                                            const json& v) {
  if (auto s = shellScalar(v)) return "declare " + name + "=" + *s;
  std::string items;
  for (auto& [key, item] : v.items()) {
    auto s = shellScalar(item);
    if (!s) return std::nullopt;
    items += v.is_array() ? *s + " " : "[" + shellQuote(key) + "]=" + *s + " ";
  }
  return std::string("declare -") + (v.is_array() ? "a " : "A ") + name + "=(" +
         items + ")";
}

}  // namespace

EnvLookup processEnvLookup() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

std::string rewriteOutputPlaceholders(const store::StoreDir& storeDir,
                                      const store::Derivation& drv,
                                      std::string s) {
  for (auto& [name, o] : drv.outputs) {
    if (!o.path) continue;
    std::string from = store::hashPlaceholder(name);
    std::string to = storeDir.printPath(*o.path);
    for (size_t at = s.find(from); at != std::string::npos;
         at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
  }
  return s;
}

std::string structuredAttrsToShell(const std::string& text) {
  json attrs = json::parse(text);
  std::string out;
  for (auto& [name, v] : attrs.items()) {
    if (!isShellIdentifier(name)) continue;
    if (auto decl = shellDeclaration(name, v)) out += *decl + "\n";
  }
  return out;
}

BuildEnvironment makeBuildEnvironment(const store::StoreDir& storeDir,
                                      const store::Derivation& drv,
                                      const BuildEnvContext& ctx) {
  BuildEnvironment out;
  addDefaultVariables(out.env, ctx);
  if (auto j = drv.env.find("__json"); j != drv.env.end())
    addStructuredAttrs(storeDir, drv, j->second, out, ctx);
  else
    addDerivationVariables(drv, out, ctx);
  addBuildDirVariables(out.env, ctx);
  if (store::isFixedOutput(drv)) {
    if (auto i = drv.env.find("impureEnvVars"); i != drv.env.end()) {
      for (auto& name : words(i->second)) {
        auto value = ctx.impureEnv ? ctx.impureEnv(name) : std::nullopt;
        out.env[name] = value.value_or("");
      }
    }
    out.env["NIX_OUTPUT_CHECKED"] = "1";
  }
  out.env["NIX_LOG_FD"] = "2";
  out.env["TERM"] = "xterm-256color";
  for (auto* values : {&out.env, &out.files})
    for (auto& [name, value] : *values)
      value = rewriteOutputPlaceholders(storeDir, drv, std::move(value));
  return out;
}

}  // namespace kiln::worker
