// Bodies, token checks and request submission of the write API
// (api_request.h).
#include "api_request.h"

#include "kiln/scheduler/state_db.h"

namespace kiln::web {

using nlohmann::json;
using scheduler::TokenScope;

namespace {

std::string lowerType(const Request& req) {
  std::string t = req.header("content-type");
  for (char& c : t) c = static_cast<char>(std::tolower(c));
  return t;
}

json parseForm(const std::string& body) {
  json out = json::object();
  size_t i = 0;
  while (i < body.size()) {
    size_t amp = body.find('&', i);
    if (amp == std::string::npos) amp = body.size();
    std::string kv = body.substr(i, amp - i);
    i = amp + 1;
    if (kv.empty()) continue;
    size_t eq = kv.find('=');
    auto k = percentDecode(kv.substr(0, eq), true);
    auto v =
        percentDecode(eq == std::string::npos ? "" : kv.substr(eq + 1), true);
    if (!k || !v) throw HttpError(400, "malformed form field '" + kv + "'");
    out[*k] = *v;
  }
  return out;
}

bool startsWith(const std::string& s, const char* p) {
  return s.rfind(p, 0) == 0;
}

}  // namespace

bool isFormPost(const Request& req) {
  return startsWith(lowerType(req), "application/x-www-form-urlencoded");
}

json parseApiBody(const Request& req) {
  if (req.body.size() > kMaxApiBody)
    throw HttpError(413, "the body is larger than " +
                             std::to_string(kMaxApiBody) + " bytes");
  if (isFormPost(req)) return parseForm(req.body);
  if (req.body.find_first_not_of(" \t\r\n") == std::string::npos)
    return json::object();
  json v;
  try {
    v = json::parse(req.body);
  } catch (const json::parse_error& e) {
    throw HttpError(400, std::string("malformed JSON body: ") + e.what());
  }
  if (!v.is_object()) throw HttpError(400, "the JSON body must be an object");
  return v;
}

void requireScope(const WebContext& ctx, const Request& req, const json& body,
                  TokenScope need) {
  std::optional<std::string> token = req.bearerToken();
  if (!token && body.is_object() && body.contains("token") &&
      body["token"].is_string() && !body["token"].get<std::string>().empty())
    token = body["token"].get<std::string>();
  std::string needName(scheduler::tokenScopeName(need));
  if (!token)
    throw HttpError(401, "this needs an API token of scope '" + needName +
                             "' (Authorization: Bearer TOKEN)");
  auto scope = ctx.scopeOf(*token);
  if (!scope) throw HttpError(403, "the API token is unknown or revoked");
  if (!scheduler::scopeAllows(*scope, need))
    throw HttpError(403, "the API token's scope '" +
                             std::string(scheduler::tokenScopeName(*scope)) +
                             "' does not allow this (needs '" + needName +
                             "')");
}

Guard privateReadGuard(const WebContext& ctx) {
  return [&ctx](const Request& req) {
    if (req.method == "GET" || req.method == "HEAD")
      requireScope(ctx, req, json(), TokenScope::kRead);
  };
}

json submitOrThrow(const WebContext& ctx, const std::string& kind,
                   const json& args) {
  try {
    return ctx.apply(kind, args);
  } catch (const scheduler::SchedulerStateError& e) {
    std::string m = e.what();
    if (startsWith(m, "no build") || startsWith(m, "no project") ||
        startsWith(m, "no jobset") || startsWith(m, "no such") ||
        startsWith(m, "no unrevoked"))
      throw HttpError(404, m);
    if (m.find("already") != std::string::npos ||
        m.find(" is not ") != std::string::npos)
      throw HttpError(409, m);
    throw HttpError(400, m);
  } catch (const HttpError&) {
    throw;
  } catch (const Error& e) {
    // A timeout or the scheduler's own failure, not the caller's.
    throw HttpError(503,
                    std::string("the scheduler did not apply it: ") + e.what());
  }
}

int64_t bodyInt(const json& body, const std::string& name, int64_t def,
                int64_t min, int64_t max) {
  if (!body.contains(name)) return def;
  const json& v = body[name];
  int64_t n = 0;
  bool ok = false;
  if (v.is_number_integer()) {
    n = v.get<int64_t>();
    ok = true;
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    size_t used = 0;
    try {
      n = std::stoll(s, &used);
      ok = used == s.size();
    } catch (const std::exception&) {
    }
  }
  if (!ok || n < min || n > max)
    throw HttpError(400, "'" + name + "' must be an integer in " +
                             std::to_string(min) + ".." + std::to_string(max));
  return n;
}

std::string bodyString(const json& body, const std::string& name,
                       const std::string& def, size_t maxLen) {
  if (!body.contains(name)) return def;
  const json& v = body[name];
  if (!v.is_string() || v.get_ref<const std::string&>().size() > maxLen)
    throw HttpError(400, "'" + name + "' must be a string of at most " +
                             std::to_string(maxLen) + " bytes");
  return v.get<std::string>();
}

}  // namespace kiln::web
