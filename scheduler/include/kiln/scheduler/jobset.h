#pragma once
/// A jobset as evaluators see it (shared by evaluation.h and state_db.h).

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
  /// Which evaluator turns it into jobs: "builtin" (`kiln eval`) or "nix"
  /// (the real nix-instantiate, when installed).
  std::string evaluator = "builtin";
};

/// Whether `name` is an evaluator a jobset may choose ("builtin", "nix").
inline bool isJobsetEvaluator(const std::string& name) {
  return name == "builtin" || name == "nix";
}

}  // namespace kiln::scheduler
