// Commit status requests of the forges' REST APIs (forge_api.h): GitHub's
// and Gitea's `POST /repos/{owner}/{repo}/statuses/{sha}` (state, context,
// description, target_url), GitLab's `POST
// /projects/{url-encoded path}/statuses/{sha}` (state, name, description,
// target_url).
#include "forge_api.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace kiln::plugin::forge {

using nlohmann::json;

namespace {

constexpr size_t kMaxDescription = 140;

std::string percentEncode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// "owner/name" with safe characters only (the path segments it becomes).
bool validRepo(const std::string& repo) {
  if (repo.empty() || repo.size() > 512 || repo.find("..") != std::string::npos)
    return false;
  for (unsigned char c : repo)
    if (!std::isalnum(c) && c != '-' && c != '_' && c != '.' && c != '/')
      return false;
  return repo.find('/') != std::string::npos;
}

bool validSha(const std::string& sha) {
  if (sha.size() != 40 && sha.size() != 64) return false;
  for (unsigned char c : sha)
    if (!std::isxdigit(c)) return false;
  return true;
}

// "3 to build (x86_64-linux 2, aarch64-linux 1)".
std::string rebuildText(const json& rebuilds) {
  int64_t total = 0;
  std::string per;
  for (auto& [system, n] : rebuilds.items()) {
    total += n.get<int64_t>();
    per += (per.empty() ? "" : ", ") + system + " " +
           std::to_string(n.get<int64_t>());
  }
  return std::to_string(total) + " rebuilt vs base" +
         (per.empty() ? "" : " (" + per + ")");
}

// The state (kiln's words: pending, success, failure, error) and the
// description of `event`, or nullopt for other events.
std::optional<std::pair<std::string, std::string>> stateOf(const json& e) {
  std::string kind = e.value("event", "");
  const json& c = e.value("counts", json::object());
  auto n = [&](const char* k) { return std::to_string(c.value(k, 0)); };
  if (kind == "eval.queued") {
    std::string d = n("builds") + " jobs, " + n("finished") + " done";
    if (e.contains("rebuilds")) d += "; " + rebuildText(e["rebuilds"]);
    return std::make_pair("pending", d);
  }
  if (kind == "eval.done") {
    std::string d = n("succeeded") + " succeeded, " + n("failed") +
                    " failed of " + n("builds") + " jobs";
    return std::make_pair(c.value("failed", 0) == 0 ? "success" : "failure", d);
  }
  if (kind == "eval.failed")
    return std::make_pair("error", "evaluation failed");
  return std::nullopt;
}

}  // namespace

const char* apiName(Api api) {
  switch (api) {
    case Api::kGithub:
      return "github";
    case Api::kGitea:
      return "gitea";
    case Api::kGitlab:
      return "gitlab";
  }
  return "";
}

std::optional<StatusRequest> statusRequest(Api api, const json& e,
                                           const std::string& basePath,
                                           const std::string& link,
                                           const std::string& token) {
  if (!e.is_object() || !e.contains("jobset") || !e.contains("eval"))
    return std::nullopt;
  const json& js = e["jobset"];
  const json& forge = js.value("forge", json::object());
  if (forge.value("forge", "") != apiName(api)) return std::nullopt;
  auto state = stateOf(e);
  if (!state) return std::nullopt;
  std::string repo = forge.value("repo", "");
  std::string hash = e["eval"].value("inputsHash", "");
  std::string sha = hash.rfind("git:", 0) == 0 ? hash.substr(4) : "";
  if (!validRepo(repo) || !validSha(sha)) return std::nullopt;
  std::string context =
      "kiln/" + js.value("project", "") + ":" + js.value("name", "");
  std::string description = state->second.substr(0, kMaxDescription);
  std::string target;
  if (!link.empty()) {
    int64_t id = e["eval"].value("id", int64_t{0});
    target = link + "/eval/" + std::to_string(id);
    if (e.contains("baseEval"))
      target += "/compare?base=" + std::to_string(e["baseEval"].get<int64_t>());
  }
  StatusRequest r;
  r.headers = {{"User-Agent", "kiln-forge-status/1"},
               {"Content-Type", "application/json"}};
  switch (api) {
    case Api::kGithub:
      r.path = basePath + "/repos/" + repo + "/statuses/" + sha;
      r.headers.emplace_back("Accept", "application/vnd.github+json");
      r.headers.emplace_back("Authorization", "Bearer " + token);
      r.headers.emplace_back("X-GitHub-Api-Version", "2022-11-28");
      r.body = {{"state", state->first},
                {"context", context},
                {"description", description}};
      break;
    case Api::kGitea:
      r.path = basePath + "/repos/" + repo + "/statuses/" + sha;
      r.headers.emplace_back("Authorization", "token " + token);
      r.body = {{"state", state->first},
                {"context", context},
                {"description", description}};
      break;
    case Api::kGitlab: {
      r.path =
          basePath + "/projects/" + percentEncode(repo) + "/statuses/" + sha;
      r.headers.emplace_back("PRIVATE-TOKEN", token);
      std::string s = state->first == "failure" || state->first == "error"
                          ? "failed"
                          : state->first;
      r.body = {{"state", s}, {"name", context}, {"description", description}};
      break;
    }
  }
  if (!target.empty()) r.body["target_url"] = target;
  return r;
}

std::optional<int64_t> rateLimitedUntil(
    unsigned status, const std::map<std::string, std::string>& headers,
    int64_t nowSec) {
  if (status != 403 && status != 429) return std::nullopt;
  auto get = [&](const char* k) -> std::optional<int64_t> {
    auto it = headers.find(k);
    if (it == headers.end() || it->second.empty() || it->second.size() > 18)
      return std::nullopt;
    char* end = nullptr;
    long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (*end != '\0' || v < 0) return std::nullopt;
    return v;
  };
  constexpr int64_t kMaxWait = 3600;
  if (auto after = get("retry-after"))
    return nowSec + std::min(*after, kMaxWait);
  auto remaining = get("x-ratelimit-remaining");
  if (!remaining) remaining = get("ratelimit-remaining");
  if (remaining && *remaining == 0) {
    auto reset = get("x-ratelimit-reset");
    if (!reset) reset = get("ratelimit-reset");
    if (reset) return std::min(std::max(*reset, nowSec), nowSec + kMaxWait);
    return nowSec + 60;
  }
  if (status == 429) return nowSec + 60;
  return std::nullopt;  // a 403 without a rate limit: a refused token
}

}  // namespace kiln::plugin::forge
