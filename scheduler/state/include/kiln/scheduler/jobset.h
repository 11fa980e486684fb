#pragma once
/// A jobset as evaluators see it (shared by evaluation.h and state_db.h).

#include <cctype>
#include <cstdint>
#include <string>

namespace kiln::scheduler {

/// What an evaluator needs to know of a jobset: a plain value (the service
/// fills it from its database row; a plugin never sees the database).
struct JobsetSpec {
  int64_t id = 0;
  std::string name;
  /// "path" (a folder) or "git" (a repository URL or folder + branch).
  std::string kind = "path";
  std::string location;
  std::string branch;
  /// The Nix file inside the collection (relative), default "default.nix".
  std::string file = "default.nix";
  /// Attribute path selecting the jobs inside the file ("" = top level).
  std::string attribute;
  /// `--arg`-style arguments as a JSON object of Nix expression strings.
  std::string arguments = "{}";
  /// Which evaluator plugin turns it into jobs: "builtin" (`kiln eval`),
  /// "nix" (the real nix-instantiate, when installed) or any other loaded
  /// evaluator plugin's name (checked by the scheduler, docs/plugin-abi.md).
  std::string evaluator = "builtin";
  /// git only: the commit to evaluate (a forge's webhook named it); empty:
  /// the branch's head. Not stored with the jobset: set per evaluation.
  std::string revision;
};

/// Whether `name` can name an evaluator plugin (1 to 64 letters, digits,
/// '-' or '_', as the plugin loader accepts); whether one of that name is
/// loaded is the scheduler's question (checkEvaluatorLoaded).
inline bool isEvaluatorName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_')
      return false;
  return true;
}

}  // namespace kiln::scheduler
