// docs/openapi.yaml cannot drift from the server: every route registered
// under /api/ is described there with its method, and the file describes
// no route the server lacks.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "kiln/common/file.h"
#include "kiln/web/routes.h"
#include "test_support.h"

namespace kiln::web {
namespace {

using Routes = std::set<std::pair<std::string, std::string>>;

// The (METHOD, path) pairs under `paths:` of an OpenAPI file written with
// two-space indentation (paths at 2, methods at 4).
Routes openApiRoutes(const std::string& text) {
  Routes out;
  std::istringstream in(text);
  std::string line, current;
  bool inPaths = false;
  static const std::set<std::string> kMethods = {"get",    "put",   "post",
                                                 "delete", "patch", "head"};
  while (std::getline(in, line)) {
    if (line == "paths:") {
      inPaths = true;
      continue;
    }
    if (!inPaths || line.empty()) continue;
    if (line[0] != ' ') break;  // the next top-level key
    if (line.rfind("  /", 0) == 0 && line.back() == ':') {
      current = line.substr(2, line.size() - 3);
    } else if (line.rfind("    ", 0) == 0 && line[4] != ' ') {
      std::string key = line.substr(4, line.find(':') - 4);
      if (kMethods.count(key)) {
        std::string m = key;
        for (char& c : m) c = char(std::toupper(c));
        out.insert({m, current});
      }
    }
  }
  return out;
}

TEST(OpenApi, DescribesExactlyTheApiRoutes) {
  WebContext ctx;
  ctx.stateDir = "/nonexistent";
  Router router;
  addAllRoutes(router, ctx);
  Routes served;
  for (auto& [method, pattern] : router.routes())
    if (pattern.rfind("/api/", 0) == 0) served.insert({method, pattern});
  Routes described = openApiRoutes(
      readFile(test::sourceDir() + "/docs/openapi.yaml"));
  ASSERT_FALSE(described.empty());
  for (auto& r : served)
    EXPECT_TRUE(described.count(r))
        << r.first << " " << r.second << " is missing from docs/openapi.yaml";
  for (auto& r : described)
    EXPECT_TRUE(served.count(r))
        << r.first << " " << r.second
        << " is in docs/openapi.yaml but the server has no such route";
}

}  // namespace
}  // namespace kiln::web
