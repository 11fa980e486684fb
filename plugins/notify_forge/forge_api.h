#pragma once
// What the forges' status notifiers send (docs/ci.md): from one kiln
// event (eval.queued, eval.done, eval.failed of a jobset a forge drives)
// the commit status request of each forge's documented REST API. Pure:
// forge_status_notifier.cc sends what these return.

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

/// The status request for `event` (a notification's JSON), or nullopt
/// when it is not one of `api`'s jobsets' evaluation events. `basePath`
/// is the API URL's path ("" or e.g. "/api/v1"); `link` the kiln web's
/// URL ("" = no link); `token` the access token.
std::optional<StatusRequest> statusRequest(Api api, const nlohmann::json& event,
                                           const std::string& basePath,
                                           const std::string& link,
                                           const std::string& token);

/// The Unix time before which a rate-limited forge should not be asked
/// again, from an answer's status and (lower-case) headers at `nowSec`;
/// nullopt when the answer is not a rate limit.
std::optional<int64_t> rateLimitedUntil(
    unsigned status, const std::map<std::string, std::string>& headers,
    int64_t nowSec);

}  // namespace kiln::plugin::forge
