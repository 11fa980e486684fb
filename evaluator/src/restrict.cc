// Restricted evaluation (Nix's restrict-eval): which paths and URIs an
// evaluation may read. Messages are Nix 2.8's, plus settings.restrictHint.
#include <limits.h>
#include <stdlib.h>

#include <cerrno>
#include <ostream>

#include "eval_parts.h"
#include "corepkgs.h"
#include "kiln/common/file.h"
#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {

namespace {

// `path` equals `dir` or lies below it (both canonical).
bool isDirOrInDir(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || (path.size() > dir.size() && path.starts_with(dir) &&
                         path[dir.size()] == '/');
}

// `path` with every symlink of its existing prefix resolved; components
// that do not exist are kept as they are (as Nix's canonPath(p, true)).
std::string resolveSymlinks(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf)) return buf;
  size_t slash = path.rfind('/');
  if (slash == std::string::npos || path == "/") return path;
  std::string parent = slash == 0 ? "/" : path.substr(0, slash);
  std::string resolved = resolveSymlinks(parent);
  return (resolved == "/" ? "" : resolved) + path.substr(slash);
}

// A value that cannot be had: forcing it throws.
struct ExprRefused : Expr {
  std::string message;
  void eval(EvalState&, Env&, Value&) override {
    throw RestrictedPathError(message);
  }
  void bindVars(EvalState&, const StaticEnv&) override {}
  void show(const SymbolTable&, std::ostream& out) const override {
    out << "«refused»";
  }
};

}  // namespace

void EvalState::mkRefused(Value& v, std::string message) {
  auto* e = arena.make<ExprRefused>();
  e->message = std::move(message);
  v.mkThunk(&heap().allocEnv(0), e);  // needs no variables (baseEnv may not exist yet)
}

void EvalState::initAllowedPaths() {
  if (!settings.restrictsPaths()) return;
  std::vector<std::string> given;
  for (auto& [prefix, dir] : searchPathEntries)
    if (!dir.empty()) given.push_back(canonPath(absPath(dir)));
  for (auto& p : settings.allowedPaths) given.push_back(canonPath(absPath(p)));
  // Also where each leads, so that a file reached through a symlinked
  // allowed folder (e.g. a checkout under a symlinked /tmp) passes the
  // second, symlink-resolved check.
  for (auto& p : given) {
    allowPath(p);
    if (std::string real = resolveSymlinks(p); real != p) allowPath(real);
  }
}

void EvalState::allowPath(const std::string& path) {
  if (!settings.restrictsPaths()) return;
  auto lock = lockIfThreaded(pathsMutex_);
  allowedPaths_.push_back(path);
}

bool EvalState::isAllowed(const std::string& path) const {
  auto lock = lockIfThreaded(pathsMutex_);
  for (auto& dir : allowedPaths_)
    if (isDirOrInDir(path, dir)) return true;
  return false;
}

std::string EvalState::checkSourcePath(const std::string& path) {
  if (!settings.restrictsPaths()) return path;
  auto refuse = [&](const char* kind, const std::string& p) {
    // Nix names pure evaluation when both are on.
    throw RestrictedPathError("access to " + std::string(kind) + " path '" + p +
                              "' is forbidden " +
                              (settings.pureEval ? "in pure eval mode (use '--impure' to override)"
                                                 : "in restricted mode" + settings.restrictHint));
  };
  // First without resolving symlinks, so that `allowed/../..` cannot
  // probe where symlinks point; then the real location.
  std::string abs = canonPath(path);
  if (abs.starts_with(kCorepkgsPrefix)) return abs;
  if (!isAllowed(abs))
    refuse("absolute", abs);
  std::string real = resolveSymlinks(abs);
  if (!isAllowed(real))
    refuse("canonical", real);
  return real;
}

void EvalState::checkUri(const std::string& uri) {
  if (!settings.restrictEval) return;
  // Equal to a prefix or below it: "https://github.co" does not allow
  // "https://github.com".
  for (auto& prefix : settings.allowedUris)
    if (uri == prefix || (!prefix.empty() && uri.size() > prefix.size() &&
                          uri.starts_with(prefix) &&
                          (prefix.back() == '/' || uri[prefix.size()] == '/')))
      return;
  if (uri.starts_with("/")) {
    checkSourcePath(uri);
    return;
  }
  if (uri.starts_with("file://")) {
    checkSourcePath(uri.substr(7));
    return;
  }
  throw RestrictedPathError("access to URI '" + uri +
                            "' is forbidden in restricted mode" +
                            settings.restrictHint);
}

}  // namespace kiln::eval
