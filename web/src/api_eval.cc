// Evaluations from the API (api_request.h): the operate-scope trigger, the
// status of a queued request, and the push webhook, which triggers a
// jobset's evaluation when the body's HMAC-SHA256 signature (GitHub's
// `X-Hub-Signature-256: sha256=<hex>`) matches the farm's push secret.
// Evaluations take long, so these only queue the request (202) and the
// scheduler applies it when it runs.
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "api_request.h"
#include "kiln/common/encoding.h"

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

// Whether `header` is "sha256=<hex HMAC-SHA256 of body under key>".
bool signatureMatches(const std::string& key, const std::string& body,
                      const std::string& header) {
  if (key.empty() || header.rfind("sha256=", 0) != 0) return false;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(body.data()), body.size(),
            mac, &len))
    return false;
  std::string want =
      base16Encode(std::string_view(reinterpret_cast<char*>(mac), len));
  std::string got = header.substr(7);
  for (char& c : got) c = static_cast<char>(std::tolower(c));
  return got.size() == want.size() &&
         CRYPTO_memcmp(got.data(), want.data(), want.size()) == 0;
}

Response pushHook(const WebContext& ctx, const Request& req,
                  const RouteParams& p) {
  if (req.body.size() > kMaxApiBody)
    throw HttpError(413, "the body is larger than " +
                             std::to_string(kMaxApiBody) + " bytes");
  std::string sig = req.header("x-hub-signature-256");
  if (sig.empty())
    throw HttpError(403, "missing X-Hub-Signature-256 (sha256=<hex HMAC>)");
  if (!signatureMatches(ctx.pushSecret, req.body, sig))
    throw HttpError(403, "the push signature does not match");
  // GitHub's ping event only checks the hook.
  if (req.header("x-github-event") == "ping")
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
              "/jobset/" + p.at("project") + "/" + p.at("jobset"), 303);
        return r;
      });
  router.add("GET", "/api/request/{id}",
             [&ctx](const Request&, const RouteParams& p) {
               return requestStatus(ctx, p);
             });
  router.add("POST", "/api/push/{project}/{jobset}",
             [&ctx](const Request& req, const RouteParams& p) {
               return pushHook(ctx, req, p);
             });
}

}  // namespace kiln::web
