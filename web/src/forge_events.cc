// Forge webhooks: signatures and payloads (forge_events.h). The payload
// fields read are the ones each forge documents for its push and pull
// (merge) request events.
#include "forge_events.h"

#include "hmac.h"

namespace kiln::web {

using nlohmann::json;

namespace {

constexpr size_t kMaxField = 4096;
constexpr size_t kMaxTitle = 200;

// The string at `path` (keys) in `j`, or "" when absent or not a string;
// 400 when longer than kMaxField.
std::string str(const json& j, std::initializer_list<const char*> path) {
  const json* at = &j;
  for (const char* key : path) {
    if (!at->is_object() || !at->contains(key)) return "";
    at = &(*at)[key];
  }
  if (!at->is_string()) return "";
  const auto& s = at->get_ref<const std::string&>();
  if (s.size() > kMaxField)
    throw HttpError(400, "webhook field '" + std::string(*path.begin()) +
                             "...' is longer than 4096 bytes");
  return s;
}

int64_t num(const json& j, std::initializer_list<const char*> path) {
  const json* at = &j;
  for (const char* key : path) {
    if (!at->is_object() || !at->contains(key)) return 0;
    at = &(*at)[key];
  }
  return at->is_number_integer() ? at->get<int64_t>() : 0;
}

// Whether `sha` is a full hex commit id (SHA-1 or SHA-256), not all zeros.
bool isCommit(const std::string& sha) {
  if (sha.size() != 40 && sha.size() != 64) return false;
  bool zero = true;
  for (char c : sha) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    zero = zero && c == '0';
  }
  return !zero;
}

ForgeEvent ignored(std::string why) {
  ForgeEvent e;
  e.why = std::move(why);
  return e;
}

void addUrls(ForgeEvent& e, const json& repo,
             std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    std::string u = str(repo, {k});
    if (!u.empty()) e.urls.push_back(u);
  }
}

// A push: a branch's new head (a deleted branch or a tag is ignored).
ForgeEvent pushEvent(std::string ref, std::string after) {
  if (ref.rfind("refs/heads/", 0) != 0)
    return ignored("not a branch: " + ref.substr(0, 200));
  if (!isCommit(after)) return ignored("the branch was deleted");
  ForgeEvent e;
  e.kind = ForgeEvent::Kind::kPush;
  e.branch = ref.substr(11);
  e.sha = std::move(after);
  return e;
}

// GitHub's and Gitea's actions of pull requests, as kiln's.
std::string prAction(const std::string& action) {
  if (action == "opened" || action == "reopened") return "open";
  if (action == "synchronize" || action == "synchronized") return "update";
  if (action == "closed") return "close";
  return "";
}

ForgeEvent githubLike(Forge forge, const std::string& event, const json& b) {
  const json& repo = b.value("repository", json::object());
  ForgeEvent e;
  if (event == "ping") {
    e.kind = ForgeEvent::Kind::kPing;
  } else if (event == "push") {
    e = pushEvent(str(b, {"ref"}), str(b, {"after"}));
  } else if (event == "pull_request") {
    std::string action = prAction(str(b, {"action"}));
    if (action.empty())
      return ignored("pull request action '" +
                     str(b, {"action"}).substr(0, 100) + "'");
    const json& pr = b.value("pull_request", json::object());
    e.kind = ForgeEvent::Kind::kPullRequest;
    e.action = action;
    e.number = num(b, {"number"}) ? num(b, {"number"}) : num(pr, {"number"});
    e.branch = str(pr, {"base", "ref"});
    e.sha = str(pr, {"head", "sha"});
    e.headUrl = str(pr, {"head", "repo", "clone_url"});
    e.headRef = "refs/pull/" + std::to_string(e.number) + "/head";
    e.title = str(pr, {"title"}).substr(0, kMaxTitle);
    if (e.number <= 0 || e.branch.empty() || !isCommit(e.sha) ||
        e.headUrl.empty())
      throw HttpError(400, std::string(forgeName(forge)) +
                               " pull request without number, base ref, "
                               "head sha or head repository clone_url");
  } else {
    return ignored("event '" + event.substr(0, 100) + "'");
  }
  e.repo = str(repo, {"full_name"});
  addUrls(e, repo, {"clone_url", "ssh_url", "html_url", "git_url"});
  return e;
}

std::string mrAction(const std::string& action, const json& attrs) {
  if (action == "open" || action == "reopen") return "open";
  // An update without `oldrev` changed only the description or labels.
  if (action == "update") return attrs.contains("oldrev") ? "update" : "";
  if (action == "close" || action == "merge") return "close";
  return "";
}

ForgeEvent gitlab(const std::string& event, const json& b) {
  const json& project = b.value("project", json::object());
  ForgeEvent e;
  std::string kind = str(b, {"object_kind"});
  if (event == "Push Hook" && kind == "push") {
    e = pushEvent(str(b, {"ref"}), str(b, {"after"}));
  } else if (event == "Merge Request Hook" && kind == "merge_request") {
    const json& a = b.value("object_attributes", json::object());
    std::string action = mrAction(str(a, {"action"}), a);
    if (action.empty())
      return ignored("merge request action '" +
                     str(a, {"action"}).substr(0, 100) + "'");
    e.kind = ForgeEvent::Kind::kPullRequest;
    e.action = action;
    e.number = num(a, {"iid"});
    e.branch = str(a, {"target_branch"});
    e.sha = str(a, {"last_commit", "id"});
    e.headUrl = str(a, {"source", "git_http_url"});
    e.headRef = "refs/merge-requests/" + std::to_string(e.number) + "/head";
    e.title = str(a, {"title"}).substr(0, kMaxTitle);
    if (e.number <= 0 || e.branch.empty() || !isCommit(e.sha) ||
        e.headUrl.empty())
      throw HttpError(400,
                      "gitlab merge request without iid, target_branch, "
                      "last_commit.id or source.git_http_url");
  } else {
    return ignored("event '" + event.substr(0, 100) + "'");
  }
  e.repo = str(project, {"path_with_namespace"});
  addUrls(e, project, {"git_http_url", "git_ssh_url", "web_url"});
  return e;
}

}  // namespace

const char* forgeName(Forge forge) {
  switch (forge) {
    case Forge::kGithub:
      return "github";
    case Forge::kGitea:
      return "gitea";
    case Forge::kGitlab:
      return "gitlab";
  }
  return "";
}

std::optional<Forge> forgeNamed(const std::string& name) {
  for (Forge f : {Forge::kGithub, Forge::kGitea, Forge::kGitlab})
    if (name == forgeName(f)) return f;
  return std::nullopt;
}

bool forgeSignatureValid(Forge forge, const Request& req,
                         const std::string& secret) {
  if (secret.empty()) return false;
  std::string given;
  switch (forge) {
    case Forge::kGithub: {
      given = req.header("x-hub-signature-256");
      if (given.rfind("sha256=", 0) != 0) return false;
      given = given.substr(7);
      break;
    }
    case Forge::kGitea:
      given = req.header("x-gitea-signature");
      if (given.empty()) given = req.header("x-forgejo-signature");
      break;
    case Forge::kGitlab:
      given = req.header("x-gitlab-token");
      return !given.empty() && constantTimeEquals(given, secret);
  }
  if (given.empty()) return false;
  for (char& c : given) c = static_cast<char>(std::tolower(c));
  return constantTimeEquals(given, hmacSha256Hex(secret, req.body));
}

std::string forgeDeliveryId(Forge forge, const Request& req) {
  std::string id;
  switch (forge) {
    case Forge::kGithub:
      id = req.header("x-github-delivery");
      break;
    case Forge::kGitea:
      id = req.header("x-gitea-delivery");
      if (id.empty()) id = req.header("x-forgejo-delivery");
      break;
    case Forge::kGitlab:
      id = req.header("x-gitlab-event-uuid");
      break;
  }
  return id.size() > 200 ? std::string() : id;
}

json ForgeEvent::toJson() const {
  static const char* kKinds[] = {"ignored", "ping", "push", "pull_request"};
  return {{"kind", kKinds[static_cast<int>(kind)]},
          {"repo", repo},
          {"urls", urls},
          {"branch", branch},
          {"sha", sha},
          {"action", action},
          {"number", number},
          {"headRef", headRef},
          {"headUrl", headUrl},
          {"title", title}};
}

ForgeEvent parseForgeEvent(Forge forge, const Request& req) {
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object())
    throw HttpError(400, "the webhook's body is not a JSON object");
  switch (forge) {
    case Forge::kGithub:
      return githubLike(forge, req.header("x-github-event"), body);
    case Forge::kGitea: {
      std::string event = req.header("x-gitea-event");
      if (event.empty()) event = req.header("x-forgejo-event");
      return githubLike(forge, event, body);
    }
    case Forge::kGitlab:
      return gitlab(req.header("x-gitlab-event"), body);
  }
  return ignored("unknown forge");
}

}  // namespace kiln::web
