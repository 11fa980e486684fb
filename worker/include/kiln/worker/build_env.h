#pragma once
/// The environment and build-directory files a builder starts with, as
/// Nix 2.8 sets them up (docs/worker.md lists every variable). Pure: no I/O,
/// so the exact result is unit-tested against what Nix 2.8 was seen to do.

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "kiln/store/derivation.h"
#include "kiln/store/store_path.h"

namespace kiln::worker {

/// Reads a variable of the worker's own environment (for the
/// `impureEnvVars` of fixed-output derivations); nullopt if unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

/// The process environment (std::getenv).
EnvLookup processEnvLookup();

/// What makeBuildEnvironment needs besides the derivation.
struct BuildEnvContext {
  std::string buildDir;     ///< the build directory as the builder sees it
  std::string storeDir;     ///< the logical store directory (NIX_STORE)
  unsigned buildCores = 1;  ///< NIX_BUILD_CORES
  EnvLookup impureEnv;      ///< for fixed-output impureEnvVars; empty: unset
};

/// A builder's complete environment plus the files to create in the build
/// directory before it starts.
struct BuildEnvironment {
  std::map<std::string, std::string> env;
  /// Build-directory file name (e.g. ".attr-<hash>") → contents.
  std::map<std::string, std::string> files;
};

/// Computes the environment of `drv`: the derivation's env, minus the
/// `passAsFile` attributes (each becomes file `.attr-<nix32 sha256(name)>`
/// and variable `<name>Path`), plus NIX_BUILD_TOP, TMPDIR, TEMPDIR, TMP,
/// TEMP (= the build dir), PATH=/path-not-set, HOME=/homeless-shelter,
/// NIX_STORE, NIX_BUILD_CORES, NIX_LOG_FD=2 and TERM=xterm-256color. For
/// fixed-output derivations, each `impureEnvVars` name gets the worker's
/// value (empty if unset) and NIX_OUTPUT_CHECKED=1. With
/// `__structuredAttrs` (an env entry `__json`), none of the derivation's
/// variables are exported; `.attrs.json` (outputs replaced by their paths)
/// and `.attrs.sh` are written and NIX_ATTRS_JSON_FILE / NIX_ATTRS_SH_FILE
/// point at them. Output placeholders (`builtins.placeholder`) in every
/// value and file are replaced by the output paths, as Nix does. Throws
/// FormatError if `__json` is not a JSON object.
BuildEnvironment makeBuildEnvironment(const store::StoreDir& storeDir,
                                      const store::Derivation& drv,
                                      const BuildEnvContext& ctx);

/// `s` with each output's placeholder (store::hashPlaceholder) replaced by
/// that output's path; outputs whose path is not known stay as they are.
std::string rewriteOutputPlaceholders(const store::StoreDir& storeDir,
                                      const store::Derivation& drv,
                                      std::string s);

/// The `.attrs.sh` text for a structured-attrs JSON object: strings,
/// integers, booleans and null as `declare name=value`, lists of those as
/// `declare -a`, objects of those as `declare -A`; names that are not shell
/// identifiers and other values are skipped. Values are single-quoted.
std::string structuredAttrsToShell(const std::string& json);

}  // namespace kiln::worker
