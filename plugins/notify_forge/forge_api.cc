// Commit status requests of the forges' REST APIs (forge_api.h): GitHub's
// and Gitea's `POST /repos/{owner}/{repo}/statuses/{sha}` (state, context,
// description, target_url), GitLab's `POST
// /projects/{url-encoded path}/statuses/{sha}` (state, name, description,
// target_url). An evaluation's status has the context
// `kiln/<project>:<jobset>`, a job's `kiln/<project>:<jobset>/<job>`.
#include "forge_api.h"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <stdexcept>

namespace kiln::plugin::forge {

using nlohmann::json;

namespace {

constexpr size_t kMaxDescription = 140;
constexpr size_t kMaxContext = 255;
constexpr size_t kMaxGlobs = 64;
constexpr size_t kMaxGlob = 256;

// What one status says, in kiln's words (state: pending, running, success,
// failure, error, cancelled), before each forge's shape.
struct Status {
  std::string state, context, description, target;
};

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

// The commit an event's evaluation was made at: its `revision`, else the
// commit of a git inputs hash; "" for other inputs.
std::string commitOf(const json& e) {
  const json& ev = e.value("eval", json::object());
  std::string rev = ev.value("revision", "");
  if (!rev.empty()) return rev;
  std::string hash = ev.value("inputsHash", "");
  return hash.rfind("git:", 0) == 0 ? hash.substr(4) : "";
}

std::string jobsetContext(const json& js) {
  return "kiln/" + js.value("project", "") + ":" + js.value("name", "");
}

// An evaluation event's status.
std::optional<Status> evalStatus(const json& e, const StatusSettings& s) {
  auto state = stateOf(e);
  if (!state) return std::nullopt;
  Status st{state->first, jobsetContext(e["jobset"]), state->second, ""};
  if (!s.link.empty()) {
    int64_t id = e["eval"].value("id", int64_t{0});
    st.target = s.link + "/eval/" + std::to_string(id);
    if (e.contains("baseEval"))
      st.target +=
          "/compare?base=" + std::to_string(e["baseEval"].get<int64_t>());
  }
  return st;
}

bool namedBy(const std::vector<std::string>& globs, const std::string& job) {
  return std::any_of(globs.begin(), globs.end(), [&](const std::string& g) {
    return ::fnmatch(g.c_str(), job.c_str(), 0) == 0;
  });
}

// A build event's status: running when it starts, its result when it
// ends; for jobs the settings name only.
std::optional<Status> jobStatus(const json& e, const StatusSettings& s) {
  std::string kind = e.value("event", "");
  if (kind != "build.started" && kind != "build.finished") return std::nullopt;
  const json& b = e["build"];
  std::string job = b.value("job", "");
  if (job.empty() || !namedBy(s.jobs, job)) return std::nullopt;
  Status st{"running", jobsetContext(b["jobset"]) + "/" + job, "building", ""};
  if (kind == "build.finished") {
    int status = b.value("status", -1);
    st.state = status == 0 ? "success" : status == 4 ? "cancelled" : "failure";
    st.description = b.value("statusName", "unknown");
    if (b.contains("reusedFrom"))
      st.description += " (reused from build " +
                        std::to_string(b["reusedFrom"].get<int64_t>()) + ")";
  }
  if (!s.link.empty())
    st.target = s.link + "/build/" + std::to_string(b.value("id", int64_t{0}));
  return st;
}

// `st` in `api`'s documented request shape.
StatusRequest requestOf(Api api, const Status& st, const std::string& repo,
                        const std::string& sha, const StatusSettings& s) {
  std::string context = st.context.substr(0, kMaxContext);
  std::string description = st.description.substr(0, kMaxDescription);
  StatusRequest r;
  r.headers = {{"User-Agent", "kiln-forge-status/1"},
               {"Content-Type", "application/json"}};
  if (api == Api::kGitlab) {
    r.path =
        s.basePath + "/projects/" + percentEncode(repo) + "/statuses/" + sha;
    r.headers.emplace_back("PRIVATE-TOKEN", s.token);
    std::string state = st.state == "failure" || st.state == "error" ? "failed"
                        : st.state == "cancelled" ? "canceled"
                                                  : st.state;
    r.body = {
        {"state", state}, {"name", context}, {"description", description}};
  } else {
    r.path = s.basePath + "/repos/" + repo + "/statuses/" + sha;
    if (api == Api::kGithub) {
      r.headers.emplace_back("Accept", "application/vnd.github+json");
      r.headers.emplace_back("Authorization", "Bearer " + s.token);
      r.headers.emplace_back("X-GitHub-Api-Version", "2022-11-28");
    } else {
      r.headers.emplace_back("Authorization", "token " + s.token);
    }
    std::string state = st.state == "running"     ? "pending"
                        : st.state == "cancelled" ? "error"
                                                  : st.state;
    r.body = {
        {"state", state}, {"context", context}, {"description", description}};
  }
  if (!st.target.empty()) r.body["target_url"] = st.target;
  return r;
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

std::vector<std::string> parseJobGlobs(const std::string& setting) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= setting.size()) {
    size_t end = std::min(setting.find(',', at), setting.size());
    std::string glob = setting.substr(at, end - at);
    at = end + 1;
    if (glob.empty() || glob.size() > kMaxGlob)
      throw std::invalid_argument("jobs: each glob has 1 to 256 bytes");
    out.push_back(glob);
    if (out.size() > kMaxGlobs)
      throw std::invalid_argument("jobs: at most 64 globs");
  }
  return out;
}

std::optional<StatusRequest> statusRequest(Api api, const json& e,
                                           const StatusSettings& s) {
  if (!e.is_object() || !e.contains("eval") || !e["eval"].is_object())
    return std::nullopt;
  std::optional<Status> st;
  const json* js = nullptr;
  if (e.contains("jobset") && e["jobset"].is_object()) {
    js = &e["jobset"];
    st = evalStatus(e, s);
  } else if (!s.jobs.empty() && e.contains("build") && e["build"].is_object() &&
             e["build"].contains("jobset")) {
    js = &e["build"]["jobset"];
    st = jobStatus(e, s);
  }
  if (!st) return std::nullopt;
  const json& forge = js->value("forge", json::object());
  if (forge.value("forge", "") != apiName(api)) return std::nullopt;
  std::string repo = forge.value("repo", "");
  std::string sha = commitOf(e);
  if (!validRepo(repo) || !validSha(sha)) return std::nullopt;
  return requestOf(api, *st, repo, sha, s);
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
