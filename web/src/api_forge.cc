// The forges' webhooks (docs/ci.md): POST /api/webhook/{github,gitea,
// gitlab}. A delivery is accepted for each project whose webhook secret
// signs it (forge_events.h); none: 401 and nothing changes. A delivery id
// seen before is ignored; a push or pull request event is queued as a
// `forge-event` request, which the scheduler applies (it knows which
// jobsets follow the repository, and checks the delivery id again in the
// database, so a replay after a restart changes nothing either).
#include <fstream>
#include <sstream>

#include "api_request.h"
#include "forge_events.h"
#include "kiln/common/logging.h"
#include "kiln/scheduler/forge_store.h"
#include "push_replay.h"

namespace kiln::web {

using nlohmann::json;

namespace {

/// The largest webhook body read (GitHub's pushes of many commits are the
/// largest; the server's own bound applies first).
constexpr size_t kMaxForgeBody = 1 << 20;
constexpr size_t kMaxSecret = 4096;

// The secret in `path` without trailing newlines; "" (logged) when it
// cannot be read or is empty or too long, which then matches nothing.
std::string readSecret(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string s(kMaxSecret + 1, '\0');
  if (in) {
    in.read(s.data(), static_cast<std::streamsize>(s.size()));
    s.resize(static_cast<size_t>(in.gcount()));
  }
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (!in.good() && !in.eof()) s.clear();
  if (s.empty() || s.size() > kMaxSecret) {
    logWarn("webhook secret file " + path + " is unreadable, empty or over " +
            std::to_string(kMaxSecret) + " bytes");
    return "";
  }
  return s;
}

// The projects whose secret signs `req`.
std::vector<std::string> signingProjects(const WebContext& ctx,
                                         const Request& req, Forge forge) {
  scheduler::StateView* v = ctx.view();
  if (!v) throw HttpError(503, "the scheduler has not created its state yet");
  std::vector<std::string> out;
  for (auto& p : scheduler::ForgeStore(v->rows().db()).webhookProjects())
    if (forgeSignatureValid(forge, req, readSecret(p.secretFile)))
      out.push_back(p.name);
  return out;
}

Response forgeHook(const WebContext& ctx, const Request& req, Forge forge) {
  if (req.body.size() > kMaxForgeBody)
    throw HttpError(413, "the body is larger than " +
                             std::to_string(kMaxForgeBody) + " bytes");
  std::vector<std::string> projects = signingProjects(ctx, req, forge);
  if (projects.empty())
    throw HttpError(401,
                    std::string("no project's webhook secret signs this ") +
                        forgeName(forge) + " delivery");
  std::string delivery = forgeDeliveryId(forge, req);
  if (delivery.empty())
    throw HttpError(400, "the delivery has no (or an over-long) id header");
  const Clock& clock = ctx.clock ? *ctx.clock : RealClock::instance();
  int64_t now = clock.nowMs() / 1000;
  if (!ctx.pushReplay->firstUse(std::string(forgeName(forge)) + ":" + delivery,
                                now, now))
    return Response::json(
        {{"ignored", "delivery " + delivery + " was received before"}});
  ForgeEvent e = parseForgeEvent(forge, req);
  if (e.kind == ForgeEvent::Kind::kPing)
    return Response::json({{"pong", true}});
  if (e.kind == ForgeEvent::Kind::kIgnored)
    return Response::json({{"ignored", e.why}});
  int64_t id = ctx.queue("forge-event", {{"forge", forgeName(forge)},
                                         {"delivery", delivery},
                                         {"projects", projects},
                                         {"event", e.toJson()}});
  return Response::json(
      {{"request", id}, {"status", "/api/request/" + std::to_string(id)}}, 202);
}

}  // namespace

void addForgeRoutes(Router& router, WebContext& ctx) {
  if (!ctx.pushReplay) ctx.pushReplay = std::make_shared<PushReplayGuard>();
  router.add("POST", "/api/webhook/{forge}",
             [&ctx](const Request& req, const RouteParams& p) {
               auto forge = forgeNamed(p.at("forge"));
               if (!forge)
                 throw HttpError(404, "no forge '" + p.at("forge") +
                                          "' (github, gitea, gitlab)");
               return forgeHook(ctx, req, *forge);
             });
}

}  // namespace kiln::web
