#pragma once
// The write API's shared parts (docs/web.md, "Access" and "Mutations"):
// reading a bounded JSON or HTML-form body, checking a bearer token's
// scope, and submitting a request to the scheduler with its errors turned
// into HTTP answers.

#include <nlohmann/json.hpp>
#include <string>

#include "kiln/scheduler/tokens.h"
#include "kiln/web/context.h"
#include "kiln/web/http.h"
#include "kiln/web/router.h"

namespace kiln::web {

/// The largest body the API reads (the server bounds every body too).
constexpr size_t kMaxApiBody = 64 << 10;

/// A mutation's body as a JSON object: JSON (any content type but a form;
/// an empty body is `{}`), or `application/x-www-form-urlencoded` fields
/// as strings. HttpError 400 naming the problem for malformed JSON, a
/// non-object, or a malformed form; 413 when over kMaxApiBody.
nlohmann::json parseApiBody(const Request& req);
/// Whether `req`'s body is an HTML form (answered with a redirect).
bool isFormPost(const Request& req);

/// Checks that `req` carries a token (`Authorization: Bearer`, or the
/// `token` field of `body` when it is a form) of at least scope `need`.
/// HttpError 401 when there is none, 403 when it is unknown, revoked or
/// its scope is too low.
void requireScope(const WebContext& ctx, const Request& req,
                  const nlohmann::json& body, scheduler::TokenScope need);

/// The guard of private reads: GET/HEAD need a read token; other methods
/// check their own scope.
Guard privateReadGuard(const WebContext& ctx);

/// ctx.apply(kind, args), with the scheduler's caller errors as HttpError:
/// "no such ..."/"no build ..." 404, a state conflict ("already", "is
/// not") 409, anything else the caller did 400; a timeout or scheduler
/// failure 503.
nlohmann::json submitOrThrow(const WebContext& ctx, const std::string& kind,
                             const nlohmann::json& args);

/// The field `name` of `body` as an integer (JSON number or form text) in
/// [min, max], or `def` when absent; HttpError 400 naming it otherwise.
int64_t bodyInt(const nlohmann::json& body, const std::string& name,
                int64_t def, int64_t min, int64_t max);
/// The field `name` as a string of at most `maxLen` bytes, or `def` when
/// absent; HttpError 400 naming it otherwise.
std::string bodyString(const nlohmann::json& body, const std::string& name,
                       const std::string& def, size_t maxLen = 1000);

/// Registers the evaluation trigger, the request status and the push
/// webhook (api_eval.cc).
void addEvalRoutes(Router& router, WebContext& ctx);

/// Registers the forges' webhooks, /api/webhook/{github,gitea,gitlab}
/// (api_forge.cc, docs/ci.md).
void addForgeRoutes(Router& router, WebContext& ctx);

}  // namespace kiln::web
