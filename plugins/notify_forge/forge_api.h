#pragma once
// What the forges' status notifiers send (docs/ci.md): from one kiln
// event (eval.queued, eval.done, eval.failed of a jobset a forge drives;
// with per-job statuses configured also build.started and build.finished
// of the jobs named) the commit status request of each forge's documented
// REST API. Pure: forge_status_notifier.cc sends what these return.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::plugin::forge {

/// GitHub, Gitea (and Forgejo), GitLab.
enum class Api { kGithub, kGitea, kGitlab };

/// "github", "gitea", "gitlab" (the `forge` of an event's jobset).
const char* apiName(Api api);

/// One request to a forge.
struct StatusRequest {
  std::string method = "POST";
  std::string path;  ///< below the API's base URL
  std::vector<std::pair<std::string, std::string>> headers;
  nlohmann::json body;
};

/// What a notifier was configured with.
struct StatusSettings {
  std::string basePath;  ///< the API URL's path ("" or e.g. "/api/v1")
  std::string link;      ///< the kiln web's URL ("" = no link)
  std::string token;     ///< the access token
  /// Globs (`*`, `?`, `[...]`) of the jobs that get statuses of their own;
  /// none: one status per evaluation only.
  std::vector<std::string> jobs;
};

/// The globs of a `jobs` setting: comma-separated, at most 64 of at most
/// 256 bytes each. Throws std::invalid_argument otherwise.
std::vector<std::string> parseJobGlobs(const std::string& setting);

/// The status request for `event` (a notification's JSON), or nullopt
/// when it is not one of `api`'s jobsets' evaluation events, nor a build
/// event of a job `settings.jobs` names.
std::optional<StatusRequest> statusRequest(Api api, const nlohmann::json& event,
                                           const StatusSettings& settings);

/// The Unix time before which a rate-limited forge should not be asked
/// again, from an answer's status and (lower-case) headers at `nowSec`;
/// nullopt when the answer is not a rate limit.
std::optional<int64_t> rateLimitedUntil(
    unsigned status, const std::map<std::string, std::string>& headers,
    int64_t nowSec);

}  // namespace kiln::plugin::forge
