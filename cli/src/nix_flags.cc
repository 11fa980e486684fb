// Nix 2.8's common command-line flags for `kiln instantiate` (see
// nix_flags.h). The setting names and kinds are those `nix show-config`
// of Nix 2.8.0 lists on Linux.
#include "nix_flags.h"

#include <algorithm>
#include <boost/program_options/errors.hpp>
#include <cctype>
#include <cstdlib>

#include "kiln/common/error.h"

namespace kiln::cli {
namespace {

using UsageError = boost::program_options::error;

enum class Kind { kBool, kInt, kString, kList };

struct SettingDef {
  const char* name;
  Kind kind;
};

constexpr Kind kBool = Kind::kBool, kInt = Kind::kInt, kString = Kind::kString,
               kList = Kind::kList;

constexpr SettingDef kSettings[] = {
    {"accept-flake-config", kBool},
    {"access-tokens", kList},
    {"allow-dirty", kBool},
    {"allow-import-from-derivation", kBool},
    {"allow-new-privileges", kBool},
    {"allow-symlinked-store", kBool},
    {"allow-unsafe-native-code-during-evaluation", kBool},
    {"allowed-impure-host-deps", kList},
    {"allowed-uris", kList},
    {"allowed-users", kList},
    {"auto-optimise-store", kBool},
    {"bash-prompt", kString},
    {"bash-prompt-suffix", kString},
    {"build-hook", kString},
    {"build-poll-interval", kInt},
    {"build-users-group", kString},
    {"builders", kString},
    {"builders-use-substitutes", kBool},
    {"commit-lockfile-summary", kString},
    {"compress-build-log", kBool},
    {"connect-timeout", kInt},
    {"cores", kInt},
    {"diff-hook", kString},
    {"download-attempts", kInt},
    {"enforce-determinism", kBool},
    {"eval-cache", kBool},
    {"experimental-features", kList},
    {"extra-platforms", kList},
    {"fallback", kBool},
    {"filter-syscalls", kBool},
    {"flake-registry", kString},
    {"fsync-metadata", kBool},
    {"gc-reserved-space", kInt},
    {"hashed-mirrors", kList},
    {"http-connections", kInt},
    {"http2", kBool},
    {"ignored-acls", kList},
    {"impersonate-linux-26", kBool},
    {"keep-build-log", kBool},
    {"keep-derivations", kBool},
    {"keep-env-derivations", kBool},
    {"keep-failed", kBool},
    {"keep-going", kBool},
    {"keep-outputs", kBool},
    {"log-lines", kInt},
    {"max-build-log-size", kInt},
    {"max-free", kInt},
    {"max-jobs", kInt},
    {"max-silent-time", kInt},
    {"min-free", kInt},
    {"min-free-check-interval", kInt},
    {"nar-buffer-size", kInt},
    {"narinfo-cache-negative-ttl", kInt},
    {"narinfo-cache-positive-ttl", kInt},
    {"netrc-file", kString},
    {"nix-path", kList},
    {"plugin-files", kList},
    {"post-build-hook", kString},
    {"pre-build-hook", kString},
    {"preallocate-contents", kBool},
    {"print-missing", kBool},
    {"pure-eval", kBool},
    {"repeat", kInt},
    {"require-sigs", kBool},
    {"restrict-eval", kBool},
    {"run-diff-hook", kBool},
    {"sandbox", kBool},
    {"sandbox-build-dir", kString},
    {"sandbox-dev-shm-size", kString},
    {"sandbox-fallback", kBool},
    {"sandbox-paths", kList},
    {"secret-key-files", kList},
    {"show-trace", kBool},
    {"stalled-download-timeout", kInt},
    {"store", kString},
    {"substitute", kBool},
    {"substituters", kList},
    {"sync-before-registering", kBool},
    {"system", kString},
    {"system-features", kList},
    {"tarball-ttl", kInt},
    {"timeout", kInt},
    {"trace-function-calls", kBool},
    {"trusted-public-keys", kList},
    {"trusted-substituters", kList},
    {"trusted-users", kList},
    {"use-case-hack", kBool},
    {"use-registries", kBool},
    {"use-sqlite-wal", kBool},
    {"user-agent-suffix", kString},
    {"warn-dirty", kBool},
};

// Old names --option still takes (not flags of their own).
constexpr std::pair<const char*, const char*> kAliases[] = {
    {"build-compress-log", "compress-build-log"},
    {"build-cores", "cores"},
    {"build-fallback", "fallback"},
    {"binary-caches-parallel-connections", "http-connections"},
    {"build-impersonate-linux-26", "impersonate-linux-26"},
    {"build-keep-log", "keep-build-log"},
    {"gc-keep-derivations", "keep-derivations"},
    {"env-keep-derivations", "keep-env-derivations"},
    {"gc-keep-outputs", "keep-outputs"},
    {"build-max-log-size", "max-build-log-size"},
    {"build-max-jobs", "max-jobs"},
    {"build-max-silent-time", "max-silent-time"},
    {"build-repeat", "repeat"},
    {"build-use-chroot", "sandbox"},
    {"build-use-sandbox", "sandbox"},
    {"build-chroot-dirs", "sandbox-paths"},
    {"build-sandbox-paths", "sandbox-paths"},
    {"build-use-substitutes", "substitute"},
    {"binary-caches", "substituters"},
    {"build-timeout", "timeout"},
    {"binary-cache-public-keys", "trusted-public-keys"},
    {"trusted-binary-caches", "trusted-substituters"},
};

// Switches of LegacyArgs, MixCommonArgs, MixEvalArgs and nix-instantiate
// that change nothing kiln does (logging, building, flakes, repair).
constexpr const char* kNoEffectSwitches[] = {
    "-Q",       "--no-build-output", "-K", "-k", "--impure",
    "--repair", "--relaxed-sandbox"};

// Flags taking one value that change nothing kiln does.
constexpr const char* kNoEffectValueFlags[] = {"--log-format", "--eval-store"};

const SettingDef* findSetting(const std::string& name) {
  for (auto& s : kSettings)
    if (name == s.name) return &s;
  return nullptr;
}

std::string canonicalName(const std::string& name) {
  for (auto& [alias, target] : kAliases)
    if (name == alias) return target;
  return name;
}

bool isDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// The value as Nix's Setting<T>::set would store it; throws Error with
// Nix's message when it would refuse it.
std::string checkedValue(const SettingDef& def, const std::string& value) {
  std::string name = def.name;
  if (def.kind == Kind::kBool) {
    if (value == "true" || value == "yes" || value == "1") return "true";
    if (value == "false" || value == "no" || value == "0") return "false";
    throw Error("Boolean setting '" + name + "' has invalid value '" + value +
                "'");
  }
  if (name == "max-jobs" && value != "auto" && !isDigits(value))
    throw Error(
        "configuration setting 'max-jobs' should be 'auto' or an integer");
  if (def.kind == Kind::kInt && name != "max-jobs" && !isDigits(value))
    throw Error("setting '" + name + "' has invalid value '" + value + "'");
  return value;
}

// An integer with an optional K, M, G or T suffix (--cores, --timeout,
// --max-silent-time), as Nix's string2IntWithUnitPrefix.
std::string unitPrefixed(std::string value) {
  uint64_t multiplier = 1;
  if (!value.empty() &&
      std::isalpha(static_cast<unsigned char>(value.back()))) {
    char u = static_cast<char>(
        std::toupper(static_cast<unsigned char>(value.back())));
    const std::string units = "KMGT";
    size_t at = units.find(u);
    if (at == std::string::npos)
      throw UsageError(std::string("invalid unit specifier '") + u + "'");
    multiplier = uint64_t{1} << (10 * (at + 1));
    value.pop_back();
  }
  if (!isDigits(value)) throw UsageError("'" + value + "' is not an integer");
  return std::to_string(std::strtoull(value.c_str(), nullptr, 10) * multiplier);
}

// --option NAME VALUE: problems are warnings, as in Nix.
void setOption(NixFlags& out, const std::string& rawName,
               const std::string& value, std::ostream& warn) {
  bool extra = rawName.starts_with("extra-");
  std::string name = canonicalName(extra ? rawName.substr(6) : rawName);
  const SettingDef* def = findSetting(name);
  if (!def || (extra && def->kind != Kind::kList)) {
    out.unknownSettings.push_back(rawName);
    return;
  }
  try {
    if (extra)
      out.extras[name] += (out.extras[name].empty() ? "" : " ") + value;
    else
      out.settings[name] = checkedValue(*def, value);
  } catch (const Error& e) {
    warn << "warning: error: " << e.what() << "\n";
  }
}

// One setting given as a flag of its own (--NAME [VALUE], --no-NAME,
// --extra-NAME VALUE). Returns how many values it takes (-1: not one).
int settingFlagArity(const std::string& flag) {
  if (!flag.starts_with("--")) return -1;
  std::string name = flag.substr(2);
  if (const SettingDef* d = findSetting(name))
    return d->kind == Kind::kBool ? 0 : 1;
  if (name.starts_with("no-"))
    if (const SettingDef* d = findSetting(name.substr(3));
        d && d->kind == Kind::kBool)
      return 0;
  if (name.starts_with("extra-"))
    if (const SettingDef* d = findSetting(name.substr(6));
        d && d->kind == Kind::kList)
      return 1;
  return -1;
}

void setSettingFlag(NixFlags& out, const std::string& flag,
                    const std::string& value) {
  std::string name = flag.substr(2);
  if (name.starts_with("extra-") && !findSetting(name)) {
    name = name.substr(6);
    out.extras[name] += (out.extras[name].empty() ? "" : " ") + value;
  } else if (name.starts_with("no-") && !findSetting(name)) {
    out.settings[name.substr(3)] = "false";
  } else {
    const SettingDef& def = *findSetting(name);
    try {
      out.settings[name] =
          def.kind == Kind::kBool ? "true" : checkedValue(def, value);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }
}

template <size_t N>
bool among(const std::string& a, const char* const (&list)[N]) {
  for (const char* x : list)
    if (a == x) return true;
  return false;
}

// The values following flag `a` at `in[i]`: throws Nix's error when fewer
// than `n` remain.
std::vector<std::string> values(const std::vector<std::string>& in, size_t& i,
                                size_t n) {
  if (i + n >= in.size())
    throw UsageError("flag '" + in[i] + "' requires " + std::to_string(n) +
                     " argument(s)");
  std::vector<std::string> v(in.begin() + static_cast<long>(i) + 1,
                             in.begin() + static_cast<long>(i + n) + 1);
  i += n;
  return v;
}

// Handles a flag of the fixed set at in[i]; false if `a` is not one.
bool takeFixedFlag(const std::vector<std::string>& in, size_t& i, NixFlags& out,
                   std::ostream& warn) {
  const std::string& a = in[i];
  if (among(a, kNoEffectSwitches) || a == "--keep-failed" ||
      a == "--keep-going" || a == "--fallback")
    return true;
  if (among(a, kNoEffectValueFlags)) return values(in, i, 1), true;
  if (a == "-v" || a == "--verbose") return ++out.verbosity, true;
  if (a == "--quiet")
    return out.verbosity = std::max(0, out.verbosity - 1), true;
  if (a == "--debug") return out.verbosity = 6, true;
  if (a == "--version") return out.version = true;
  if (a == "--find-file") return out.findFile = true;
  if (a == "--dry-run") return out.dryRun = true;
  if (a == "--no-gc-warning") return out.noGcWarning = true;
  if (a == "--eval-only") return out.evalOnly = true;
  if (a == "--parse-only") return out.parseOnly = true;
  if (a == "--option") {
    auto v = values(in, i, 2);
    setOption(out, v[0], v[1], warn);
  } else if (a == "--override-flake") {
    values(in, i, 2);
  } else if (a == "-j" || a == "--max-jobs") {
    std::string v = values(in, i, 1)[0];
    if (v != "auto" && !isDigits(v))
      throw UsageError(
          "configuration setting 'max-jobs' should be 'auto' or an integer");
    out.settings["max-jobs"] = v;
  } else if (a == "--cores" || a == "--timeout" || a == "--max-silent-time") {
    out.settings[a.substr(2)] = unitPrefixed(values(in, i, 1)[0]);
  } else if (a == "--store") {
    out.settings["store"] = values(in, i, 1)[0];
  } else {
    return false;
  }
  return true;
}

// Splits a space-separated list setting.
std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> w;
  for (size_t at = 0; at < s.size();) {
    size_t end = s.find_first_of(" \t\n", at);
    if (end == std::string::npos) end = s.size();
    if (end > at) w.push_back(s.substr(at, end - at));
    at = end + 1;
  }
  return w;
}

// A setting's value (or `dflt`) followed by its extra- values.
std::string listValue(const NixFlags& f, const std::string& name,
                      const std::string& dflt) {
  auto set = f.settings.find(name);
  std::string v = set != f.settings.end() ? set->second : dflt;
  auto extra = f.extras.find(name);
  if (extra != f.extras.end()) v += (v.empty() ? "" : " ") + extra->second;
  return v;
}

}  // namespace

std::string applyNixSettings(const NixFlags& flags,
                             eval::EvalSettings& settings, size_t includes,
                             bool& showTrace) {
  auto get = [&](const char* name) -> const std::string* {
    auto it = flags.settings.find(name);
    return it == flags.settings.end() ? nullptr : &it->second;
  };
  if (auto* v = get("restrict-eval")) settings.restrictEval = *v == "true";
  if (auto* v = get("show-trace")) showTrace = *v == "true";
  if (auto* v = get("system")) settings.currentSystem = *v;
  settings.logInstantiations = flags.verbosity >= 5;
  if (auto* v = get("pure-eval")) settings.pureEval = *v == "true";
  settings.allowedUris = words(listValue(flags, "allowed-uris", ""));
  if (get("nix-path") || flags.extras.count("nix-path")) {
    // The setting replaces NIX_PATH (which follows the -I entries).
    std::string fromEnv;
    for (size_t i = includes; i < settings.searchPath.size(); ++i)
      fromEnv += (fromEnv.empty() ? "" : " ") + settings.searchPath[i];
    settings.searchPath.resize(includes);
    for (auto& e : words(listValue(flags, "nix-path", fromEnv)))
      settings.searchPath.push_back(e);
  }
  auto* store = get("store");
  if (!store || *store == "auto" || *store == "local" || *store == "daemon")
    return "";
  if (store->starts_with("/")) return *store;
  if (store->starts_with("local?root=") &&
      store->find('&') == std::string::npos)
    return store->substr(11);
  throw Error("kiln instantiate cannot use the store '" + *store +
              "'; it writes to kiln's store (--state-dir), to a directory "
              "(--store local?root=DIR or --store-root DIR) or nowhere "
              "(--readonly-mode)");
}

std::vector<std::string> expandShortFlags(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  bool dashDash = false;
  for (const std::string& a : in) {
    if (a == "--") dashDash = true;
    if (dashDash || a.size() <= 2 || a[0] != '-' ||
        !std::isalpha(static_cast<unsigned char>(a[1]))) {
      out.push_back(a);
      continue;
    }
    out.push_back(a.substr(0, 2));
    for (size_t j = 2; j < a.size(); ++j) {
      if (!std::isalpha(static_cast<unsigned char>(a[j]))) {
        out.push_back(a.substr(j));
        break;
      }
      out.push_back(std::string("-") + a[j]);
    }
  }
  return out;
}

std::vector<std::string> takeNixFlags(
    const std::vector<std::string>& in, NixFlags& out,
    const std::function<bool(const std::string&)>& takesValue,
    std::ostream& warn) {
  std::vector<std::string> rest;
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string& a = in[i];
    if (a == "--") {
      rest.insert(rest.end(), in.begin() + static_cast<long>(i) + 1, in.end());
      break;
    }
    if (takesValue(a)) {
      rest.push_back(a);
      if (i + 1 < in.size()) rest.push_back(in[++i]);
      continue;
    }
    if (takeFixedFlag(in, i, out, warn)) continue;
    int arity = settingFlagArity(a);
    if (arity < 0) {
      rest.push_back(a);
      continue;
    }
    setSettingFlag(out, a, arity ? values(in, i, 1)[0] : "");
  }
  for (auto& name : out.unknownSettings)
    warn << "warning: unknown setting '" << name << "'\n";
  return rest;
}

}  // namespace kiln::cli
