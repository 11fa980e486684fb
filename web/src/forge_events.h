#pragma once
// The forges' webhooks (docs/ci.md): which forge a request comes from, its
// signature checked against a project's secret, and its payload reduced
// to what kiln acts on (a push to a branch, a pull request opened, updated
// or closed). Pure functions of the request: api_forge.cc routes them.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kiln/web/http.h"

namespace kiln::web {

/// The forges whose webhooks kiln reads (Forgejo sends Gitea's).
enum class Forge { kGithub, kGitea, kGitlab };

/// "github", "gitea", "gitlab".
const char* forgeName(Forge forge);
/// The forge named `name`, if it is one.
std::optional<Forge> forgeNamed(const std::string& name);

/// Whether `req` is signed with `secret` as `forge` signs: GitHub's
/// `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`, Gitea's
/// (and Forgejo's) `X-Gitea-Signature` / `X-Forgejo-Signature: <hex>`,
/// GitLab's `X-Gitlab-Token: <secret>`. Constant time; an empty secret
/// never matches.
bool forgeSignatureValid(Forge forge, const Request& req,
                         const std::string& secret);

/// The delivery's id (X-GitHub-Delivery, X-Gitea-Delivery or
/// X-Forgejo-Delivery, X-Gitlab-Event-UUID); "" when missing.
std::string forgeDeliveryId(Forge forge, const Request& req);

/// What a webhook asks of kiln.
struct ForgeEvent {
  enum class Kind { kIgnored, kPing, kPush, kPullRequest };
  Kind kind = Kind::kIgnored;
  std::string why;   ///< kIgnored: the reason (for the answer)
  std::string repo;  ///< the forge's repository name (owner/name)
  /// The repository's URLs (clone, ssh, web), as the payload gives them.
  std::vector<std::string> urls;
  std::string branch;  ///< push: the branch; pull request: its base branch
  std::string sha;     ///< push: the new head; pull request: its head
  /// Pull requests: "open" (opened, reopened), "update" (new commits),
  /// "close" (closed or merged); other actions are kIgnored.
  std::string action;
  int64_t number = 0;   ///< pull request number (GitLab: the iid)
  std::string headRef;  ///< the ref to fetch the head from
  std::string headUrl;  ///< the head repository's clone URL
  std::string title;    ///< pull request title (at most 200 bytes)
  /// As the `event` argument of a `forge-event` request.
  nlohmann::json toJson() const;
};

/// Reads `req` (its event header and JSON body) as `forge`'s webhook.
/// Throws HttpError(400) for a body that is not the documented shape.
ForgeEvent parseForgeEvent(Forge forge, const Request& req);

}  // namespace kiln::web
