// The router and the request/response helpers, without sockets.
#include "kiln/web/router.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "response_body.h"

namespace kiln::web {
namespace {

using ::testing::HasSubstr;

Request get(const std::string& path, const std::string& method = "GET") {
  Request r;
  r.method = method;
  r.path = path;
  return r;
}

// A handler answering with the route's name and its captures.
Handler echo(const std::string& name) {
  return [name](const Request&, const RouteParams& p) {
    std::string s = name;
    for (auto& [k, v] : p.all()) s += " " + k + "=" + v;
    return Response::text(s);
  };
}

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router.add("GET", "/", echo("root"));
    router.add("GET", "/build/{id}", echo("build"));
    router.add("POST", "/build/{id}/cancel", echo("cancel"));
    router.add("GET", "/build/{id}/log", echo("log"));
    router.add("GET", "/log/{drv*}", echo("rest"));
  }
  Router router;
};

TEST_F(RouterTest, MatchesLiteralsAndCaptures) {
  EXPECT_EQ(router.handle(get("/")).body, "root");
  EXPECT_EQ(router.handle(get("/build/12")).body, "build id=12");
  EXPECT_EQ(router.handle(get("/build/12/log")).body, "log id=12");
  EXPECT_EQ(router.handle(get("/build/7/cancel", "POST")).body, "cancel id=7");
  EXPECT_EQ(router.match("GET", "/build/12").pattern, "/build/{id}");
}

TEST_F(RouterTest, RestCaptureTakesSlashesButNotNothing) {
  EXPECT_EQ(router.handle(get("/log/a/b.drv")).body, "rest drv=a/b.drv");
  EXPECT_EQ(router.handle(get("/log/")).status, 404);
  EXPECT_EQ(router.handle(get("/log")).status, 404);
}

// Routes match on the path as received: an encoded '/' stays inside its
// segment, so a job named "a/b" or "x/latest" has its own page and is not
// taken for job "a" or for x's `latest`.
TEST_F(RouterTest, EncodedSlashStaysInItsSegment) {
  router.add("GET", "/job/{job}", echo("job"));
  router.add("GET", "/job/{job}/latest", echo("latest"));
  EXPECT_EQ(router.handle(get("/job/a%2Fb")).body, "job job=a/b");
  EXPECT_EQ(router.handle(get("/job/x%2Flatest")).body, "job job=x/latest");
  EXPECT_EQ(router.handle(get("/job/x/latest")).body, "latest job=x");
  EXPECT_EQ(router.handle(get("/job/a%2Fb/latest")).body, "latest job=a/b");
  EXPECT_EQ(router.handle(get("/job/a%20b")).body, "job job=a b");
  EXPECT_EQ(router.handle(get("/job/a/b")).status, 404);
  EXPECT_EQ(router.handle(get("/job/a%zz")).status, 404);  // malformed
  EXPECT_EQ(router.handle(get("/log/a%2Fb/c.drv")).body, "rest drv=a/b/c.drv");
}

TEST_F(RouterTest, CaptureWithASuffixMatchesOnlyThatSuffix) {
  router.add("GET", "/{hash}.narinfo", echo("narinfo"));
  EXPECT_EQ(router.handle(get("/abc.narinfo")).body, "narinfo hash=abc");
  EXPECT_EQ(router.handle(get("/.narinfo")).status, 404);  // empty capture
  EXPECT_EQ(router.handle(get("/abc.narinfox")).status, 404);
  EXPECT_EQ(router.handle(get("/abc")).status, 404);
  EXPECT_EQ(router.handle(get("/a/b.narinfo")).status, 404);
  EXPECT_THROW(router.add("GET", "/{}.x", echo("x")), Error);
  EXPECT_THROW(router.add("GET", "/{a}.{b}", echo("x")), Error);
}

TEST_F(RouterTest, UnknownPathIs404WithTheClearPath) {
  Response r = router.handle(get("/nope/x"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "404 Not Found: no page at /nope/x\n");
  EXPECT_EQ(router.handle(get("/build/")).status, 404);  // empty capture
  EXPECT_EQ(router.handle(get("/build/1/log/x")).status, 404);
}

TEST_F(RouterTest, OtherMethodIs405WithAllow) {
  Response r = router.handle(get("/build/3/cancel"));
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("allow"), "POST");
  EXPECT_THAT(r.body, HasSubstr("GET is not allowed on /build/3/cancel"));
  Response d = router.handle(get("/build/3", "DELETE"));
  EXPECT_EQ(d.header("Allow"), "GET, HEAD");
}

TEST_F(RouterTest, HeadUsesTheGetHandler) {
  EXPECT_EQ(router.handle(get("/build/5", "HEAD")).body, "build id=5");
}

TEST_F(RouterTest, ErrorsAreJsonWhenAsked) {
  Request r = get("/nope");
  r.headers["accept"] = "application/json";
  Response resp = router.handle(r);
  EXPECT_EQ(resp.contentType, "application/json");
  auto j = nlohmann::json::parse(resp.body);
  EXPECT_EQ(j["status"], 404);
  EXPECT_EQ(j["error"], "no page at /nope");
}

TEST_F(RouterTest, HandlerErrorsBecomeTheirStatusOr500) {
  router.add("GET", "/bad/{id}", [](const Request&, const RouteParams& p) {
    p.id("id");
    throw std::runtime_error("database on fire");
    return Response::text("unreachable");
  });
  Response bad = router.handle(get("/bad/x1"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr("'x1' is not a valid id"));
  EXPECT_EQ(router.handle(get("/bad/0")).status, 400);
  EXPECT_EQ(router.handle(get("/bad/99999999999999999999")).status, 400);
  Response crash = router.handle(get("/bad/3"));
  EXPECT_EQ(crash.status, 500);
  EXPECT_THAT(crash.body, ::testing::Not(HasSubstr("on fire")));
}

TEST_F(RouterTest, RefusesMalformedOrDuplicatePatterns) {
  EXPECT_THROW(router.add("GET", "build", echo("x")), Error);
  EXPECT_THROW(router.add("GET", "/a/{}", echo("x")), Error);
  EXPECT_THROW(router.add("GET", "/a/{rest*}/b", echo("x")), Error);
  EXPECT_THROW(router.add("GET", "/build/{id}", echo("x")), Error);
}

TEST(Request, WantsJsonAndBearerToken) {
  Request r;
  EXPECT_FALSE(r.wantsJson());
  r.headers["accept"] = "text/html,application/json;q=0.9";
  EXPECT_FALSE(r.wantsJson());
  r.headers["accept"] = "application/json";
  EXPECT_TRUE(r.wantsJson());
  r.query["format"] = "html";
  EXPECT_FALSE(r.wantsJson());
  r.query["format"] = "json";
  r.headers.clear();
  EXPECT_TRUE(r.wantsJson());
  EXPECT_FALSE(r.bearerToken());
  r.headers["authorization"] = "Basic abc";
  EXPECT_FALSE(r.bearerToken());
  r.headers["authorization"] = "bearer  tok123 ";
  EXPECT_EQ(r.bearerToken(), "tok123");
}

TEST(Http, PercentDecoding) {
  EXPECT_EQ(percentDecode("/a%20b+c", false), "/a b+c");
  EXPECT_EQ(percentDecode("a+b%2B", true), "a b+");
  EXPECT_FALSE(percentDecode("%2", false));
  EXPECT_FALSE(percentDecode("%zz", false));
  EXPECT_FALSE(percentDecode("a%00b", false));
  EXPECT_EQ(percentEncodeSegment("/nix/store/a b"), "%2Fnix%2Fstore%2Fa%20b");
  EXPECT_EQ(percentEncodeSegment("x/latest"), "x%2Flatest");
}

TEST(Http, ByteRanges) {
  auto r = parseRange("bytes=10-19", 100);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, 10u);
  EXPECT_EQ(r->last, 19u);
  r = parseRange("bytes=90-", 100);
  EXPECT_EQ(r->last, 99u);
  r = parseRange("bytes=-30", 100);
  EXPECT_EQ(r->first, 70u);
  r = parseRange("bytes=50-500", 100);
  EXPECT_EQ(r->last, 99u);
  r = parseRange("bytes=100-", 100);  // past the end: unsatisfiable
  ASSERT_TRUE(r);
  EXPECT_GT(r->first, r->last);
  EXPECT_FALSE(parseRange("bytes=1-2,5-6", 100));  // sent whole
  EXPECT_FALSE(parseRange("bytes=x-1", 100));
  EXPECT_FALSE(parseRange("lines=1-2", 100));
  EXPECT_FALSE(parseRange("bytes=5-1", 100));
}

}  // namespace
}  // namespace kiln::web
