#pragma once
// The projects and jobsets a `kiln serve` configuration declares, kept in
// the scheduler's state: requests queued in its requests table (never
// applied offline, which would take the scheduler's lock), so a scheduler
// that is restarting answers them when it is back.

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "farm_config.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::cli {

/// Queues the requests that make the state match the declared projects
/// and jobsets, and reports their answers. Not thread-safe.
class JobsetSync {
 public:
  /// Opens `database` (creating the schema). `out` receives a line per
  /// evaluation and per refused request.
  JobsetSync(const scheduler::DatabaseSpec& database, std::ostream& out);

  /// Queues: project-create for each project (one that exists is kept),
  /// jobset-create for a new jobset, jobset-update for one whose
  /// declaration differs from the state's, and an evaluation of each of
  /// those (of every enabled one when `all`); a jobset of a declared
  /// project that `projects` no longer lists is disabled. Returns one line
  /// per jobset added, changed or disabled.
  std::vector<std::string> apply(const std::vector<ConfiguredProject>& projects,
                                 bool all);
  /// Queues the token-create / token-revoke requests that make the
  /// state's API tokens match `tokens` (serve_tokens.h: secrets read from
  /// or made in their files). Returns one line per token added or revoked
  /// and one per problem ("kiln serve: token ...").
  std::vector<std::string> applyTokens(
      const std::vector<ConfiguredToken>& tokens);
  /// Reports the requests answered since the last call.
  void poll();
  /// Whether an evaluation of jobset `project`:`jobset` was asked for and
  /// is not answered yet.
  bool evaluating(const std::string& project, const std::string& jobset) const;

 private:
  struct Pending {
    int64_t id;
    std::string kind;
    std::string what;     // "project P, jobset J"
    std::string jobset;   // "P/J" for jobset-eval, else ""
  };
  void queue(const std::string& kind, const nlohmann::json& args,
             const std::string& what);
  void syncWebhook(const ConfiguredProject& p,
                   std::vector<std::string>& changes);
  void disableUndeclared(const ConfiguredProject& p,
                         std::vector<std::string>& changes);

  scheduler::StateDb db_;
  std::ostream& out_;
  std::vector<Pending> pending_;
};

/// The jobset-create / jobset-update arguments declaring `j` in project
/// `project` (name under "name").
nlohmann::json jobsetRequestArgs(const std::string& project,
                                 const ConfiguredJobset& j);

/// Whether the state's row `row` already declares `j` as written.
bool sameJobset(const scheduler::JobsetRow& row, const ConfiguredJobset& j);

}  // namespace kiln::cli
