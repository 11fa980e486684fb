// The write API (api.h): each route checks its token's scope, validates
// and bounds its body, and hands the change to the scheduler's request
// path (never writing the state database itself). An HTML form posting
// to it is answered with a redirect back to the page.
#include <cstdlib>
#include <set>

#include "api_request.h"
#include "kiln/web/api.h"

namespace kiln::web {

using nlohmann::json;
using scheduler::TokenScope;

namespace {

// One accepted body field: its JSON key, type and bounds.
struct Field {
  const char* name;
  enum Type { kString, kInt, kBool, kObject, kFraction } type;
  int64_t max = 1000;  // string bytes or integer maximum
};

// Body field `name` as a number from 0 to 1 (JSON, or form text); 400
// otherwise.
double bodyFraction(const json& body, const char* name) {
  const json& v = body[name];
  double d = -1;
  if (v.is_number()) {
    d = v.get<double>();
  } else if (v.is_string() && !v.get<std::string>().empty() &&
             v.get<std::string>().size() < 32) {
    const std::string& s = v.get_ref<const std::string&>();
    char* end = nullptr;
    d = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size()) d = -1;
  }
  if (!(d >= 0 && d <= 1))
    throw HttpError(400,
                    std::string("'") + name + "' must be a number from 0 to 1");
  return d;
}

// The fields of `body` named in `fields`, checked and converted (form
// text to integers and booleans); 400 for an unknown or bad one.
json pickFields(const json& body, const std::vector<Field>& fields) {
  json out = json::object();
  std::set<std::string> known{"token"};
  for (const Field& f : fields) {
    known.insert(f.name);
    if (!body.contains(f.name)) continue;
    const json& v = body[f.name];
    switch (f.type) {
      case Field::kString:
        out[f.name] = bodyString(body, f.name, "", size_t(f.max));
        break;
      case Field::kInt:
        out[f.name] = bodyInt(body, f.name, 0, 0, f.max);
        break;
      case Field::kBool:
        if (v.is_boolean())
          out[f.name] = v;
        else if (v == "true" || v == "on" || v == "false")
          out[f.name] = v != "false";
        else
          throw HttpError(
              400, std::string("'") + f.name + "' must be true or false");
        break;
      case Field::kObject:
        if (!v.is_object() || v.size() > 100 || v.dump().size() > 10000)
          throw HttpError(400, std::string("'") + f.name +
                                   "' must be an object (at most 100 "
                                   "entries, 10,000 bytes)");
        out[f.name] = v;
        break;
      case Field::kFraction:
        out[f.name] = bodyFraction(body, f.name);
        break;
    }
  }
  for (auto& [k, v] : body.items())
    if (!known.count(k)) throw HttpError(400, "unknown field '" + k + "'");
  return out;
}

const std::vector<Field> kJobsetFields = {
    {"kind", Field::kString, 10},
    {"location", Field::kString, 4096},
    {"branch", Field::kString, 255},
    {"file", Field::kString, 1024},
    {"attribute", Field::kString, 1024},
    {"arguments", Field::kObject},
    {"checkInterval", Field::kInt, 366 * 86400},
    {"shares", Field::kInt, 1000000},
    {"enabled", Field::kBool},
    {"evaluator", Field::kString, 64},
    {"channelJob", Field::kString, 200},
    {"maxClosureGrowth", Field::kInt, 1000000},
    {"maxBuildTimeGrowth", Field::kInt, 1000000},
    {"repeatFraction", Field::kFraction}};

// Builds a mutation's request arguments from the route and the body.
using ArgsFn = std::function<json(const RouteParams&, const json& body)>;

// A mutation route: scope check, body, request, answer (JSON, or a 303 to
// `back(params)` for a form).
Handler mutation(WebContext& ctx, TokenScope need, std::string kind,
                 ArgsFn args,
                 std::function<std::string(const RouteParams&)> back = nullptr,
                 int okStatus = 200) {
  return [&ctx, need, kind, args, back, okStatus](const Request& req,
                                                  const RouteParams& p) {
    json body = parseApiBody(req);
    requireScope(ctx, req, body, need);
    json a = args(p, body);
    json r = submitOrThrow(ctx, kind, a);
    if (isFormPost(req) && back) return Response::redirect(back(p), 303);
    return Response::json(r, okStatus);
  };
}

json buildArgs(const RouteParams& p, const json& body) {
  pickFields(body, {});
  return {{"build", p.id("id")}};
}

std::string buildPage(const RouteParams& p) {
  return "/build/" + std::to_string(p.id("id"));
}

void addBuildMutations(Router& router, WebContext& ctx) {
  router.add("POST", "/api/build/{id}/restart",
             mutation(ctx, TokenScope::kOperate, "build-restart", buildArgs,
                      buildPage));
  router.add("POST", "/api/build/{id}/cancel",
             mutation(ctx, TokenScope::kOperate, "build-cancel", buildArgs,
                      buildPage));
  router.add(
      "POST", "/api/build/{id}/bump",
      mutation(
          ctx, TokenScope::kOperate, "build-bump",
          [](const RouteParams& p, const json& body) {
            json a = pickFields(body, {{"priority", Field::kInt, 1000000}});
            a["build"] = p.id("id");
            return a;
          },
          buildPage));
  router.add(
      "POST", "/api/cached-failures/clear",
      mutation(ctx, TokenScope::kOperate, "cached-failure-clear",
               [](const RouteParams&, const json& body) {
                 return pickFields(body, {{"drvPath", Field::kString, 1024}});
               }));
}

void addProjectMutations(Router& router, WebContext& ctx) {
  router.add("POST", "/api/projects",
             mutation(
                 ctx, TokenScope::kAdmin, "project-create",
                 [](const RouteParams&, const json& body) {
                   json a = pickFields(body, {{"name", Field::kString, 100},
                                              {"description", Field::kString}});
                   if (!a.contains("name"))
                     throw HttpError(400, "'name' is required");
                   return a;
                 },
                 nullptr, 201));
  router.add("PUT", "/api/project/{project}",
             mutation(ctx, TokenScope::kAdmin, "project-edit",
                      [](const RouteParams& p, const json& body) {
                        json a =
                            pickFields(body, {{"description", Field::kString},
                                              {"enabled", Field::kBool}});
                        a["project"] = p.at("project");
                        return a;
                      }));
  router.add("POST", "/api/project/{project}/jobsets",
             mutation(
                 ctx, TokenScope::kAdmin, "jobset-create",
                 [](const RouteParams& p, const json& body) {
                   auto fields = kJobsetFields;
                   fields.push_back({"name", Field::kString, 100});
                   json a = pickFields(body, fields);
                   if (!a.contains("name") || !a.contains("location"))
                     throw HttpError(400, "'name' and 'location' are required");
                   a["project"] = p.at("project");
                   return a;
                 },
                 nullptr, 201));
  router.add("PUT", "/api/jobset/{project}/{jobset}",
             mutation(ctx, TokenScope::kAdmin, "jobset-update",
                      [](const RouteParams& p, const json& body) {
                        json a = pickFields(body, kJobsetFields);
                        a["project"] = p.at("project");
                        a["jobset"] = p.at("jobset");
                        return a;
                      }));
}

}  // namespace

void addApiRoutes(Router& router, WebContext& ctx) {
  addBuildMutations(router, ctx);
  addProjectMutations(router, ctx);
  addEvalRoutes(router, ctx);
  addForgeRoutes(router, ctx);
}

}  // namespace kiln::web
