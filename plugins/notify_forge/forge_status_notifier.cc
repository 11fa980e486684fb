// The forges' commit status notifiers `github-status`, `gitea-status` and
// `gitlab-status` (docs/ci.md): one source built once per forge
// (KILN_FORGE_STATUS_<forge>). Each posts, for the evaluations of the
// jobsets its forge drives, a pending status when the builds are queued
// (with their counts and, for a pull request, what it rebuilds per
// system against its base), then success or failure with the counts when
// every build finished; with `jobs` (comma-separated globs of job names)
// also a status per job named: running when its build starts, its result
// when it ends. Configuration: `api-url` (e.g. https://api.github.com,
// https://gitea.example/api/v1, https://gitlab.example/api/v4),
// `token-file`, optional `link` (kiln's web URL), `jobs`, `timeout-ms`,
// `ca-file`. A forge's rate-limit answer is
// respected: until the time it names, deliveries fail without asking it
// (kiln retries them later, at-least-once).
#include <chrono>
#include <ctime>
#include <memory>
#include <stdexcept>
#include <string>

#include "forge_api.h"
#include "http_client.h"
#include "kiln/plugin/plugin.hpp"

namespace {

using kiln::plugin::Failure;
namespace forge = kiln::plugin::forge;

#if defined(KILN_FORGE_STATUS_github)
constexpr forge::Api kApi = forge::Api::kGithub;
#define KILN_FORGE_STATUS_NAME "github-status"
#elif defined(KILN_FORGE_STATUS_gitea)
constexpr forge::Api kApi = forge::Api::kGitea;
#define KILN_FORGE_STATUS_NAME "gitea-status"
#else
constexpr forge::Api kApi = forge::Api::kGitlab;
#define KILN_FORGE_STATUS_NAME "gitlab-status"
#endif

int64_t nowSec() { return static_cast<int64_t>(std::time(nullptr)); }

class ForgeStatusNotifier {
 public:
  explicit ForgeStatusNotifier(kiln::plugin::Host host) {
    auto url = kiln::plugin::parseHttpUrl(host.config("api-url").value_or(""),
                                          KILN_FORGE_STATUS_NAME " api-url");
    std::string& basePath = settings_.basePath;
    basePath = url.target == "/" ? "" : url.target;
    while (!basePath.empty() && basePath.back() == '/') basePath.pop_back();
    auto tokenFile = host.config("token-file");
    if (!tokenFile)
      throw Failure(KILN_ERR_INVALID,
                    KILN_FORGE_STATUS_NAME " needs token-file=PATH");
    settings_.token = kiln::plugin::readSecretFile(*tokenFile, "forge token");
    std::string& link = settings_.link;
    link = host.config("link").value_or("");
    while (!link.empty() && link.back() == '/') link.pop_back();
    if (auto jobs = host.config("jobs")) try {
        settings_.jobs = forge::parseJobGlobs(*jobs);
      } catch (const std::invalid_argument& e) {
        throw Failure(KILN_ERR_INVALID,
                      std::string(KILN_FORGE_STATUS_NAME " ") + e.what());
      }
    auto timeout = kiln::plugin::timeoutSetting(host.config("timeout-ms"),
                                                std::chrono::seconds(10));
    client_ = std::make_unique<kiln::plugin::HttpClient>(
        url, host.config("ca-file").value_or(""), timeout);
  }

  void deliver(const std::string& event, const std::string& body) {
    (void)event;
    auto e = nlohmann::json::parse(body, nullptr, false);
    auto req = forge::statusRequest(kApi, e, settings_);
    if (!req) return;  // not an evaluation (or job) of this forge's jobsets
    if (nowSec() < blockedUntil_)
      throw Failure(KILN_ERR_FAILED,
                    KILN_FORGE_STATUS_NAME ": rate limited for " +
                        std::to_string(blockedUntil_ - nowSec()) + " s more");
    auto answer =
        client_->send(req->method, req->path, req->headers, req->body.dump());
    if (auto until =
            forge::rateLimitedUntil(answer.status, answer.headers, nowSec())) {
      blockedUntil_ = *until;
      throw Failure(KILN_ERR_FAILED, KILN_FORGE_STATUS_NAME
                                         ": rate limited (HTTP " +
                                         std::to_string(answer.status) +
                                         ") until " + std::to_string(*until));
    }
    if (answer.status < 200 || answer.status >= 300)
      throw Failure(KILN_ERR_FAILED, KILN_FORGE_STATUS_NAME " answered HTTP " +
                                         std::to_string(answer.status) + ": " +
                                         answer.body.substr(0, 200));
  }

 private:
  std::unique_ptr<kiln::plugin::HttpClient> client_;
  forge::StatusSettings settings_;
  int64_t blockedUntil_ = 0;
};

}  // namespace

KILN_NOTIFIER_PLUGIN(ForgeStatusNotifier, KILN_FORGE_STATUS_NAME, "1.0.0",
                     "posts kiln's evaluations as the forge's commit statuses")
