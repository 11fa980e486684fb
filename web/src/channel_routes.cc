// A jobset's channel (docs/release.md): where it is, its history, and the
// files Nix's channels read below /jobset/{project}/{jobset}/channel/latest.
#include "channel_routes.h"

#include "html_release.h"
#include "kiln/scheduler/release_store.h"
#include "kiln/store/compression.h"
#include "model_release.h"
#include "tar_writer.h"

namespace kiln::web {

namespace {

// The most bytes of sources a nixexprs.tar.xz holds (before compression).
constexpr uint64_t kMaxSourceBytes = uint64_t{1} << 30;
// Advances listed on the channel's page and in its API.
constexpr int64_t kListedAdvances = 50;

scheduler::StateView& viewOf(WebContext& ctx) {
  auto* view = ctx.view();
  if (!view)
    throw HttpError(503, "the scheduler has not created its state yet");
  return *view;
}

// The channel's model; 404 for an unknown jobset or a channel that never
// advanced.
json latestModel(WebContext& ctx, const RouteParams& p) {
  json m;
  try {
    m = channelModel(viewOf(ctx), p.at("project"), p.at("jobset"),
                     kListedAdvances);
  } catch (const NotFound& e) {
    throw HttpError(404, e.what());
  }
  if (m["latest"].is_null())
    throw HttpError(
        404, "the channel of " + p.at("project") + ":" + p.at("jobset") +
                 " has not advanced yet (its "
                 "job " +
                 m["channelJob"].get<std::string>() + " never succeeded)");
  return m;
}

Handler channelPage(WebContext& ctx, bool api) {
  return [&ctx, api](const Request& req, const RouteParams& p) {
    json m = latestModel(ctx, p);
    return api || req.wantsJson() ? Response::json(m)
                                  : Response::html(renderChannel(m));
  };
}

Response xz(const std::string& data, const std::string& contentType) {
  StringSink out;
  auto sink = store::makeCompressionSink("xz", out);
  sink->write(data);
  sink->finish();
  Response r;
  r.contentType = contentType;
  r.body = std::move(out.s);
  return r;
}

// One line per output path of the channel's evaluation's succeeded builds.
Handler storePaths(WebContext& ctx) {
  return [&ctx](const Request&, const RouteParams& p) {
    json m = latestModel(ctx, p);
    std::string text;
    for (auto& path : scheduler::succeededOutputs(
             viewOf(ctx).rows(), m["latest"]["eval"].get<int64_t>()))
      text += path + "\n";
    return xz(text, "application/x-xz");
  };
}

// The evaluated sources, under a folder named after the jobset.
Handler nixexprs(WebContext& ctx) {
  return [&ctx](const Request&, const RouteParams& p) {
    json m = latestModel(ctx, p);
    std::string sources = scheduler::evalSources(
        viewOf(ctx).rows(), m["latest"]["eval"].get<int64_t>());
    std::string prefix = ctx.storeDir + "/";
    if (sources.rfind(prefix, 0) != 0)
      throw HttpError(404, "the sources of evaluation " +
                               m["latest"]["eval"].dump() + " were not kept");
    std::string physical =
        ctx.stateDir + "/store/" + sources.substr(prefix.size());
    StringSink out;
    auto sink = store::makeCompressionSink("xz", out);
    try {
      writeTar(physical, p.at("jobset"), *sink, kMaxSourceBytes);
    } catch (const SysError& e) {
      throw HttpError(404, "the sources of evaluation " +
                               m["latest"]["eval"].dump() +
                               " are gone from the store: " + e.what());
    }
    sink->finish();
    Response r;
    r.contentType = "application/x-xz";
    r.body = std::move(out.s);
    return r;
  };
}

// The git revision the channel's evaluation read (git jobsets only).
Handler gitRevision(WebContext& ctx) {
  return [&ctx](const Request&, const RouteParams& p) {
    json m = latestModel(ctx, p);
    std::string inputs = m["latest"]["inputsHash"];
    if (inputs.rfind("git:", 0) != 0)
      throw HttpError(404, "the jobset's inputs are no git repository");
    return Response::text(inputs.substr(4) + "\n");
  };
}

// Where the channel's outputs are substituted from: this farm's binary
// cache, at the address the client reached it by.
Handler binaryCacheUrl(WebContext& ctx) {
  return [&ctx](const Request& req, const RouteParams& p) {
    latestModel(ctx, p);
    std::string host = req.header("host");
    if (host.empty() || host.size() > 255 ||
        host.find_first_of("/ \\\"<>\r\n") != std::string::npos)
      throw HttpError(400, "a Host header naming the farm is needed");
    return Response::text("http://" + host + "\n");
  };
}

}  // namespace

void addChannelRoutes(Router& router, WebContext& ctx) {
  const std::string latest = "/jobset/{project}/{jobset}/channel/latest";
  router.add("GET", latest, channelPage(ctx, false));
  router.add("GET", "/api" + latest, channelPage(ctx, true));
  router.add("GET", latest + "/store-paths.xz", storePaths(ctx));
  router.add("GET", latest + "/nixexprs.tar.xz", nixexprs(ctx));
  router.add("GET", latest + "/git-revision", gitRevision(ctx));
  router.add("GET", latest + "/binary-cache-url", binaryCacheUrl(ctx));
}

}  // namespace kiln::web
