// Evaluations from the API (api_request.h): the operate-scope trigger, the
// status of a queued request, and the push webhook, which triggers a
// jobset's evaluation when its HMAC-SHA256 signature under the farm's push
// secret covers a recent timestamp, the jobset and the body, and was not
// used before (docs/web.md, "Push webhook").
// Evaluations take long, so these only queue the request (202) and the
// scheduler applies it when it runs.
#include <charconv>

#include "api_request.h"
#include "hmac.h"
#include "push_replay.h"

namespace kiln::web {

using nlohmann::json;

namespace {

// Checks that jobset project:jobset exists (404 otherwise; 503 before the
// scheduler made its database).
void requireJobset(const WebContext& ctx, const std::string& project,
                   const std::string& jobset) {
  scheduler::StateView* v = ctx.view();
  if (!v) throw HttpError(503, "the scheduler has not created its state yet");
  if (!v->rows().jobsetByName(project, jobset))
    throw HttpError(404, "no jobset " + project + ":" + jobset);
}

Response queueEval(const WebContext& ctx, const RouteParams& p,
                   bool ifChanged) {
  requireJobset(ctx, p.at("project"), p.at("jobset"));
  int64_t id = ctx.queue("jobset-eval", {{"project", p.at("project")},
                                         {"jobset", p.at("jobset")},
                                         {"ifChanged", ifChanged}});
  return Response::json(
      {{"request", id}, {"status", "/api/request/" + std::to_string(id)}}, 202);
}

// Whether `header` is "sha256=<hex HMAC-SHA256 of message under key>".
bool signatureMatches(const std::string& key, const std::string& message,
                      const std::string& header) {
  if (key.empty() || header.rfind("sha256=", 0) != 0) return false;
  std::string got = header.substr(7);
  for (char& c : got) c = static_cast<char>(std::tolower(c));
  return constantTimeEquals(got, hmacSha256Hex(key, message));
}

// The `X-Kiln-Timestamp` header as Unix seconds; 403 when it is missing
// or not a number.
int64_t pushTimestamp(const Request& req) {
  std::string text = req.header("x-kiln-timestamp");
  int64_t t = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), t);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    throw HttpError(403,
                    "missing or malformed X-Kiln-Timestamp (Unix seconds)");
  return t;
}

Response pushHook(const WebContext& ctx, const Request& req,
                  const RouteParams& p) {
  if (req.body.size() > kMaxApiBody)
    throw HttpError(413, "the body is larger than " +
                             std::to_string(kMaxApiBody) + " bytes");
  std::string sig = req.header("x-kiln-signature-256");
  if (sig.empty())
    throw HttpError(403,
                    "missing X-Kiln-Signature-256 (sha256=<hex HMAC-SHA256 of "
                    "\"TIMESTAMP\\nPROJECT\\nJOBSET\\nBODY\">)");
  int64_t stamp = pushTimestamp(req);
  std::string message = std::to_string(stamp) + "\n" + p.at("project") +
                        "\n" + p.at("jobset") + "\n" + req.body;
  if (!signatureMatches(ctx.pushSecret, message, sig))
    throw HttpError(403,
                    "the push signature does not match (it covers "
                    "\"TIMESTAMP\\nPROJECT\\nJOBSET\\nBODY\")");
  const Clock& clock = ctx.clock ? *ctx.clock : RealClock::instance();
  int64_t now = clock.nowMs() / 1000;
  if (!ctx.pushReplay->fresh(stamp, now))
    throw HttpError(403, "the push's X-Kiln-Timestamp is more than " +
                             std::to_string(ctx.pushReplay->windowSec()) +
                             " s from the server's clock");
  if (!ctx.pushReplay->firstUse(sig, stamp, now))
    throw HttpError(403, "this push was already received (a replay)");
  if (req.header("x-kiln-event") == "ping")  // only checks the hook
    return Response::json({{"pong", true}});
  return queueEval(ctx, p, true);
}

Response requestStatus(const WebContext& ctx, const RouteParams& p) {
  scheduler::StateView* v = ctx.view();
  if (!v) throw HttpError(503, "the scheduler has not created its state yet");
  auto r = v->rows().request(p.id("id"));
  // Token requests carry hashes: not shown.
  if (!r || r->kind.rfind("token-", 0) == 0)
    throw HttpError(404, "no request " + p.at("id"));
  json out{{"id", r->id}, {"kind", r->kind}, {"done", r->done}};
  if (r->done) {
    out["ok"] = r->ok;
    out["result"] = json::parse(r->result, nullptr, false);
    if (out["result"].is_discarded()) out["result"] = r->result;
  }
  return Response::json(out);
}

}  // namespace

void addEvalRoutes(Router& router, WebContext& ctx) {
  router.add(
      "POST", "/api/jobset/{project}/{jobset}/eval",
      [&ctx](const Request& req, const RouteParams& p) {
        json body = parseApiBody(req);
        requireScope(ctx, req, body, scheduler::TokenScope::kOperate);
        for (auto& [k, v] : body.items())
          if (k != "ifChanged" && k != "token")
            throw HttpError(400, "unknown field '" + k + "'");
        if (body.contains("ifChanged") && !body["ifChanged"].is_boolean())
          throw HttpError(400, "'ifChanged' must be true or false");
        Response r = queueEval(ctx, p, body.value("ifChanged", false));
        if (isFormPost(req))
          return Response::redirect(
              "/jobset/" + percentEncodeSegment(p.at("project")) + "/" +
                  percentEncodeSegment(p.at("jobset")),
              303);
        return r;
      });
  router.add("GET", "/api/request/{id}",
             [&ctx](const Request&, const RouteParams& p) {
               return requestStatus(ctx, p);
             });
  if (!ctx.pushReplay) ctx.pushReplay = std::make_shared<PushReplayGuard>();
  router.add("POST", "/api/push/{project}/{jobset}",
             [&ctx](const Request& req, const RouteParams& p) {
               return pushHook(ctx, req, p);
             });
}

}  // namespace kiln::web
