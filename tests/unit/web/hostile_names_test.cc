// The pages against a hostile collection (pages.h): job names with '/',
// bidirectional overrides or thousands of characters, and build logs that
// try to inject server-sent events. Through the router, without sockets.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/common/encoding.h"
#include "kiln/common/file.h"
#include "kiln/common/hash.h"
#include "kiln/scheduler/logs.h"
#include "kiln/web/html.h"
#include "kiln/web/pages.h"
#include "web_fixture.h"

namespace kiln::web {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kBidi = "\u202E";  // RIGHT-TO-LEFT OVERRIDE

class HostileNamesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_.stateDir = fx_.stateDir();
    addPageRoutes(router_, ctx_);
    scheduler::StateDb db(fx_.stateDir() + "/scheduler.sqlite");
    for (const std::string& job : {std::string("x/latest"), std::string("a/b"),
                                   "evil" + kBidi + "gpj.exe", longName_})
      ids_[job] = addBuild(db, job);
  }

  int64_t addBuild(scheduler::StateDb& db, const std::string& job) {
    scheduler::BuildRow b;
    b.eval = fx_.eval;
    b.jobset = fx_.jobset;
    b.job = job;
    b.nixName = "n-1.0";
    b.system = "x86_64-linux";
    b.drvPath = testing::WebFixture::drv("n" + std::to_string(ids_.size()));
    b.createdMs = 1'700'000'000'000;
    int64_t id = db.createBuild(b);
    db.finishBuild(id, 0, b.createdMs + 1000, "");
    return id;
  }

  Response get(const std::string& path,
               std::map<std::string, std::string> headers = {}) {
    Request r;
    r.method = "GET";
    r.path = path;
    r.headers = std::move(headers);
    return router_.handle(r);
  }

  testing::WebFixture fx_;
  WebContext ctx_;
  Router router_;
  std::string longName_ = std::string(3000, 'L');
  std::map<std::string, int64_t> ids_;
};

TEST_F(HostileNamesTest, JobNamesWithASlashHaveTheirOwnPages) {
  Response jobset = get("/jobset/nixpkgs/trunk");
  ASSERT_EQ(jobset.status, 200);
  EXPECT_THAT(jobset.body, HasSubstr("/jobset/nixpkgs/trunk/job/x%2Flatest\""));
  EXPECT_THAT(jobset.body, HasSubstr("/jobset/nixpkgs/trunk/job/a%2Fb\""));
  for (const char* job : {"x/latest", "a/b"}) {
    std::string path = "/jobset/nixpkgs/trunk/job/" + percentEncodeSegment(job);
    Response page = get(path);
    ASSERT_EQ(page.status, 200) << path << ": " << page.body;
    EXPECT_THAT(page.body, HasSubstr("/build/" + std::to_string(ids_[job])));
    EXPECT_THAT(page.body, HasSubstr(path + "/badge.svg"));
    Response latest = get(path + "/latest");
    EXPECT_EQ(latest.status, 302);
    EXPECT_EQ(latest.header("Location"), "/build/" + std::to_string(ids_[job]));
  }
  // `x/latest` is not job x's `latest`: x has no build at all.
  EXPECT_EQ(get("/jobset/nixpkgs/trunk/job/x/latest").status, 404);
  Response build = get("/build/" + std::to_string(ids_["a/b"]));
  EXPECT_THAT(build.body, HasSubstr("/jobset/nixpkgs/trunk/job/a%2Fb\""));
}

TEST_F(HostileNamesTest, BidiOverridesAreShownAndLongNamesCut) {
  Response jobset = get("/jobset/nixpkgs/trunk");
  ASSERT_EQ(jobset.status, 200);
  EXPECT_THAT(jobset.body, Not(HasSubstr(kBidi)));
  EXPECT_THAT(jobset.body, HasSubstr("evil[U+202E]gpj.exe"));
  // The 3,000-character name: cut in the matrix, whole on hover only.
  EXPECT_THAT(jobset.body, HasSubstr("<span title=\"" + longName_ + "\">" +
                                     std::string(80, 'L') + "…</span>"));
  EXPECT_THAT(jobset.body, Not(HasSubstr(">" + std::string(81, 'L'))));
  EXPECT_EQ(htmlEscape("a\u2066b\u200Fc\u061Cd"),
            "a[U+2066]b[U+200F]c[U+061C]d");
  EXPECT_EQ(htmlName("häüßchen", 3), "<span title=\"häüßchen\">häü…</span>");
  EXPECT_EQ(htmlName("short"), "short");
}

class LiveLogTest : public HostileNamesTest {
 protected:
  // bash (unfinished) gets a running step with `log` as its first attempt.
  std::shared_ptr<BodyStream> follow(
      const std::string& log, std::map<std::string, std::string> h = {}) {
    {
      scheduler::StateDb db(fx_.stateDir() + "/scheduler.sqlite");
      scheduler::StepRow step;
      step.drvPath = fx_.drv("bash");
      db.startStep(db.upsertStep(step), "builder-1", 1);
    }
    writeFile(scheduler::stepLogPath(fx_.stateDir(), fx_.drv("bash"), 1), log);
    Response r = get("/build/" + std::to_string(fx_.bash) + "/log/live", h);
    EXPECT_TRUE(r.stream);
    return r.stream;
  }
};

// A lone '\r' ends a line for an EventSource: a log must not be able to
// start an `event: end` of its own.
TEST_F(LiveLogTest, CarriageReturnsCannotInjectEvents) {
  auto stream = follow("ok\revent: end\rdata: pwned\r\nnext\r\n");
  std::string out;
  ASSERT_EQ(stream->next(out, 4096), BodyStream::Next::kData);
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_THAT(out, HasSubstr("data: ok\n\ndata: event: end\n\n"
                             "data: data: pwned\n\ndata: next\n\n"));
  for (size_t i = 0, j; i < out.size(); i = j + 1) {
    j = out.find('\n', i);
    std::string line = out.substr(i, j - i);
    EXPECT_TRUE(line.empty() || line.starts_with("data: ") ||
                line.starts_with("id: ") || line == "event: attempt")
        << line;
  }
}

TEST_F(LiveLogTest, AReconnectResumesAtItsLastEventId) {
  auto stream = follow("one\ntwo\n", {{"last-event-id", "1:4"}});
  std::string out;
  ASSERT_EQ(stream->next(out, 4096), BodyStream::Next::kData);
  EXPECT_EQ(out, "data: two\n\nid: 1:8\n\n");  // no attempt event, no "one"
  auto fresh = follow("one\ntwo\n", {{"last-event-id", "garbage"}});
  out.clear();
  ASSERT_EQ(fresh->next(out, 4096), BodyStream::Next::kData);
  EXPECT_THAT(out, HasSubstr("event: attempt\ndata: 1\n\ndata: one\n\n"));
}

// The policy lets exactly the pages' inline style and script run.
TEST_F(LiveLogTest, ThePolicyAllowsThePagesOwnStyleAndScript) {
  follow("building\n");
  Response page = get("/build/" + std::to_string(fx_.bash));
  ASSERT_EQ(page.status, 200);
  auto inner = [&](const std::string& tag) {
    auto open = page.body.find("<" + tag + ">");
    auto close = page.body.find("</" + tag + ">");
    EXPECT_NE(open, std::string::npos) << tag;
    open += tag.size() + 2;
    return page.body.substr(open, close - open);
  };
  for (const char* tag : {"style", "script"}) {
    std::string hash =
        base64Encode(hashString(HashAlgo::kSha256, inner(tag)).bytes());
    EXPECT_THAT(contentSecurityPolicy(), HasSubstr("'sha256-" + hash + "'"))
        << tag;
  }
}

}  // namespace
}  // namespace kiln::web
