#pragma once
/// Continuous integration through the forges in the state database
/// (schema migration 16, docs/ci.md): each project's webhook secret file,
/// the webhook deliveries already received (so that a replay changes
/// nothing), and the jobsets the forges drive (a followed branch, or one
/// pull request with its head commit and its base branch's jobset).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/scheduler/sql.h"

namespace kiln::scheduler {

class StateDb;

/// `url` reduced for comparing a webhook's repository with a jobset's
/// location: no scheme, user, port-less default, trailing ".git" or "/";
/// the host lower-cased; an scp-like "git@host:owner/repo" becomes
/// "host/owner/repo"; a local folder stays as it is.
std::string normalizeRepoUrl(const std::string& url);

/// A jobset a forge drives.
struct ForgeJobsetRow {
  int64_t jobset = 0;
  std::string forge;       ///< "github", "gitea" or "gitlab"
  std::string repo;        ///< the forge's name of the repository
  int64_t number = 0;      ///< pull request number; 0 for a branch
  int64_t baseJobset = 0;  ///< a pull request's base branch's jobset
  std::string head;        ///< the newest head commit announced
  int64_t closedMs = 0;    ///< when the pull request closed; 0: open
  bool swept = false;      ///< its queued builds were cancelled after closing
};

/// A project that receives webhooks, and its secret's file.
struct WebhookProject {
  int64_t project = 0;
  std::string name;
  std::string secretFile;
};

/// How many jobs of evaluation `eval` have no build of the same
/// derivation in the newest evaluation of `baseJobset` (what a pull
/// request rebuilds against its base branch), by system.
std::map<std::string, int64_t> rebuildsAgainstBase(StateDb& db, int64_t eval,
                                                   int64_t baseJobset);

/// Typed access to the forge tables of a borrowed database. Not
/// thread-safe. Failures throw SqlError.
class ForgeStore {
 public:
  /// Works on `db`'s connection, in its transactions.
  explicit ForgeStore(StateDb& db);
  /// Works on `db` (a reader's connection).
  explicit ForgeStore(SqlConnection& db) : db_(db) {}

  /// Sets project `project`'s webhook secret file ("" removes it).
  void setWebhookSecretFile(int64_t project, const std::string& file);
  /// Project `project`'s webhook secret file, "" if none.
  std::string webhookSecretFile(int64_t project);
  /// Every project with a webhook secret file, by name.
  std::vector<WebhookProject> webhookProjects();

  /// Records delivery `id` of `forge` at `timeMs`; false if it was
  /// recorded before (a replay).
  bool recordDelivery(const std::string& forge, const std::string& id,
                      int64_t timeMs);
  /// Forgets deliveries received before `beforeMs`; returns how many.
  int64_t pruneDeliveries(int64_t beforeMs);

  /// Inserts or replaces the row of `row.jobset`.
  void upsertJobset(const ForgeJobsetRow& row);
  /// The row of jobset `jobset`, if a forge drives it.
  std::optional<ForgeJobsetRow> jobset(int64_t jobset);
  /// The pull request `number` of `repo` on `forge` in project `project`.
  std::optional<ForgeJobsetRow> pull(int64_t project, const std::string& forge,
                                     const std::string& repo, int64_t number);
  /// Pull requests closed at or before `closedBeforeMs`, not swept yet.
  std::vector<ForgeJobsetRow> closedUnswept(int64_t closedBeforeMs);

 private:
  SqlConnection& db_;
};

}  // namespace kiln::scheduler
