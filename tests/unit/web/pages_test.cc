// The dashboard's pages (pages.h) through the router, without sockets,
// against the fixture database: the HTML shows the data, the JSON twin
// carries the same, bad arguments get a 4xx with a clear message.
#include "kiln/web/pages.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "kiln/scheduler/log_store.h"
#include "kiln/scheduler/logs.h"
#include "kiln/web/html.h"
#include "web_fixture.h"

namespace kiln::web {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class PagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_.stateDir = fx_.stateDir();
    ctx_.snapshot = [this] { return snap_; };
    addPageRoutes(router_, ctx_);
  }

  Response get(const std::string& target, bool json = false) {
    Request r;
    r.method = "GET";
    auto q = target.find('?');
    r.path = target.substr(0, q);
    if (q != std::string::npos) {
      std::string rest = target.substr(q + 1);
      size_t i = 0;
      while (i <= rest.size()) {
        size_t amp = rest.find('&', i);
        if (amp == std::string::npos) amp = rest.size();
        std::string kv = rest.substr(i, amp - i);
        auto eq = kv.find('=');
        r.query[kv.substr(0, eq)] =
            eq == std::string::npos ? "" : kv.substr(eq + 1);
        i = amp + 1;
      }
    }
    if (json) r.headers["accept"] = "application/json";
    return router_.handle(r);
  }

  testing::WebFixture fx_;
  WebContext ctx_;
  Router router_;
  std::shared_ptr<scheduler::SchedulerSnapshot> snap_;
};

TEST_F(PagesTest, OverviewShowsEvaluationsAndChartsWithoutScheduler) {
  Response r = get("/");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(r.contentType, HasSubstr("text/html"));
  EXPECT_THAT(r.body, HasSubstr("No running scheduler"));
  EXPECT_THAT(r.body, HasSubstr("href=\"/eval/" + std::to_string(fx_.eval)));
  EXPECT_THAT(r.body, HasSubstr("<svg class=\"chart\""));
  EXPECT_THAT(r.body, Not(HasSubstr("<script")));  // no JavaScript needed
  Response j = get("/", true);
  EXPECT_THAT(j.contentType, HasSubstr("application/json"));
  auto m = nlohmann::json::parse(j.body);
  EXPECT_EQ(m["evaluations"][0]["id"], fx_.eval);
  EXPECT_EQ(nlohmann::json::parse(get("/api/overview").body)["evaluations"],
            m["evaluations"]);
}

TEST_F(PagesTest, OverviewWithSchedulerShowsRunningStepsAndWorkers) {
  snap_ = std::make_shared<scheduler::SchedulerSnapshot>();
  snap_->takenMs = 1'700'000'000'000 + 3'600'000 + 61'000;
  snap_->queue = {
      {fx_.helloStep, fx_.drv("hello"), "x86_64-linux", "running", "running"}};
  snap_->workers = {{"builder-1",
                     {"x86_64-linux", "i686-linux"},
                     2,
                     1,
                     {"kvm", "big-parallel"},
                     {fx_.drv("hello")},
                     1'700'000'000'000,
                     12,
                     3,
                     "memory pressure 42% > 20%",
                     "load 1.5, 3G free memory, 40G free disk"}};
  snap_->metrics.queuedBySystem = {{"x86_64-linux", 7}};
  snap_->metrics.waitingSteps = 5;
  snap_->metrics.waitingRepeats = 2;
  snap_->metrics.runningRepeats = 1;
  Response r = get("/");
  // Reproducibility checks have a card of their own, apart from steps.
  EXPECT_THAT(r.body, HasSubstr("<b>5</b>waiting"));
  EXPECT_THAT(r.body, HasSubstr("<b>2 / 1</b>checks waiting / running"));
  EXPECT_THAT(r.body, HasSubstr("builder-1"));
  EXPECT_THAT(r.body, HasSubstr("x86_64-linux, i686-linux"));
  EXPECT_THAT(r.body, HasSubstr("1m 00s"));  // elapsed since the start
  EXPECT_THAT(r.body, HasSubstr("<td class=\"num\">7</td>"));
  // The workers page: features, what it builds, last seen, its results.
  Response w = get("/workers");
  EXPECT_THAT(w.body, HasSubstr("kvm, big-parallel"));
  EXPECT_THAT(w.body, HasSubstr(fx_.drv("hello")));
  EXPECT_THAT(w.body,
              HasSubstr("<td class=\"num\">12</td><td class=\"num\">3</td>"));
  auto j = nlohmann::json::parse(get("/api/workers").body)["workers"][0];
  EXPECT_EQ(j["features"], nlohmann::json({"kvm", "big-parallel"}));
  EXPECT_EQ(j["steps"], nlohmann::json({fx_.drv("hello")}));
  EXPECT_EQ(j["lastSeenMs"], 1'700'000'000'000);
  EXPECT_EQ(j["succeededSteps"], 12);
  EXPECT_EQ(j["failedSteps"], 3);
  // Why it takes no new step, and what its last heartbeat said.
  EXPECT_THAT(w.body, HasSubstr("<strong>no new steps: memory pressure 42% "
                                "&gt; 20%</strong><br>load 1.5, 3G free "
                                "memory, 40G free disk"));
  EXPECT_EQ(j["pressure"], "memory pressure 42% > 20%");
  EXPECT_EQ(j["health"], "load 1.5, 3G free memory, 40G free disk");
}

TEST_F(PagesTest, JobsetShowsTheMatrixAndProjectsLinkToIt) {
  EXPECT_THAT(get("/projects").body,
              HasSubstr("href=\"/jobset/nixpkgs/trunk\""));
  Response r = get("/jobset/nixpkgs/trunk");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(r.body, HasSubstr("/jobset/nixpkgs/trunk/job/hello"));
  EXPECT_THAT(r.body, HasSubstr("class=\"st st-failed\" href=\"/build/" +
                                std::to_string(fx_.hello)));
  EXPECT_EQ(get("/jobset/nixpkgs/nope").status, 404);
  EXPECT_EQ(get("/api/jobset/nixpkgs/nope").status, 404);
}

TEST_F(PagesTest, EvaluationFiltersAndRefusesBadArguments) {
  std::string e = "/eval/" + std::to_string(fx_.eval);
  Response r = get(e + "?state=failed");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(r.body, HasSubstr(">gcc<"));
  EXPECT_THAT(r.body, Not(HasSubstr(">zlib<")));
  EXPECT_THAT(r.body, HasSubstr("broken.pkg"));
  EXPECT_THAT(r.body, HasSubstr("attribute &#39;x&#39; missing"));  // escaped
  Response bad = get(e + "?limit=100000");
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr("'limit' must be an integer in 1..500"));
  EXPECT_EQ(get(e + "?state=weird").status, 400);
  EXPECT_EQ(get("/eval/999").status, 404);
  EXPECT_EQ(get("/eval/abc").status, 400);
}

TEST_F(PagesTest, ComparisonListsEachCategory) {
  std::string c = "/eval/" + std::to_string(fx_.eval) + "/compare";
  Response r = get(c);
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(r.body, HasSubstr("newly-failing (1)"));
  EXPECT_THAT(r.body, HasSubstr("removed (1)"));
  EXPECT_THAT(r.body, HasSubstr(">hello<"));
  auto removed = nlohmann::json::parse(get(c + "?kind=removed", true).body);
  EXPECT_EQ(removed["changes"]["rows"][0]["job"], "perl");
  EXPECT_EQ(get(c + "?kind=bogus").status, 400);
  EXPECT_EQ(get("/eval/" + std::to_string(fx_.base) + "/compare").status, 404);
}

TEST_F(PagesTest, BuildShowsStatusStepsAndTheLatestLog) {
  Response r = get("/build/" + std::to_string(fx_.hello));
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(r.body, HasSubstr("st-failed\">Failed</span> (1)"));
  EXPECT_THAT(r.body, HasSubstr("builder-1"));
  EXPECT_THAT(r.body, HasSubstr("42s"));
  EXPECT_THAT(r.body, HasSubstr("attempt 1</a>"));
  EXPECT_THAT(r.body, HasSubstr("make: *** [all] Error 2"));
  EXPECT_THAT(r.body, Not(HasSubstr("<script")));  // finished: no live log
  Response q = get("/build/" + std::to_string(fx_.bash));
  EXPECT_THAT(q.body, HasSubstr("data-live=\"/build/" +
                                std::to_string(fx_.bash) + "/log/live\""));
  EXPECT_THAT(q.body, HasSubstr("EventSource"));
  EXPECT_EQ(get("/build/99999").status, 404);
}

TEST_F(PagesTest, LogsDownloadPerAttempt) {
  std::string l = "/build/" + std::to_string(fx_.hello) + "/log";
  Response newest = get(l);
  ASSERT_EQ(newest.status, 200);
  EXPECT_EQ(newest.filePath,
            scheduler::stepLogPath(fx_.stateDir(), fx_.drv("hello"), 2));
  EXPECT_EQ(get(l + "?attempt=1").filePath,
            scheduler::stepLogPath(fx_.stateDir(), fx_.drv("hello"), 1));
  EXPECT_EQ(get(l + "?attempt=3").status, 404);
  EXPECT_EQ(get(l + "?attempt=-1").status, 400);
  EXPECT_EQ(get("/build/" + std::to_string(fx_.bash) + "/log").status, 404);
}

TEST_F(PagesTest, LiveLogStreamsNewLinesThenEndsWhenFinished) {
  // bash is unfinished: start its step, give it a log and follow it.
  {
    scheduler::StateDb db(fx_.stateDir() + "/scheduler.sqlite");
    scheduler::StepRow step;
    step.drvPath = fx_.drv("bash");
    db.startStep(db.upsertStep(step), "builder-1", 1);
  }
  std::string log = scheduler::stepLogPath(fx_.stateDir(), fx_.drv("bash"), 1);
  writeFile(log, "configuring\n");
  Response r = get("/build/" + std::to_string(fx_.bash) + "/log/live");
  ASSERT_TRUE(r.stream);
  EXPECT_EQ(r.contentType, "text/event-stream");
  std::string out;
  EXPECT_EQ(r.stream->next(out, 4096), BodyStream::Next::kData);
  EXPECT_THAT(out, HasSubstr("event: attempt\ndata: 1\n\n"));
  EXPECT_THAT(out, HasSubstr("data: configuring\n\n"));
  out.clear();
  EXPECT_EQ(r.stream->next(out, 4096), BodyStream::Next::kWait);
  writeFile(log, "configuring\nbuilding\npartial");
  EXPECT_EQ(r.stream->next(out, 4096), BodyStream::Next::kData);
  // The partial line waits; the id says where a reconnect resumes.
  EXPECT_EQ(out, "data: building\n\nid: 1:21\n\n");
  {
    scheduler::StateDb db(fx_.stateDir() + "/scheduler.sqlite");
    db.finishBuild(fx_.bash, 4, 1, "cancelled");
  }
  out.clear();
  EXPECT_EQ(r.stream->next(out, 4096), BodyStream::Next::kData);
  EXPECT_EQ(out, "data: partial\n\nid: 1:28\n\n");  // the last line, at the end
  out.clear();
  EXPECT_EQ(r.stream->next(out, 4096), BodyStream::Next::kEnd);
  EXPECT_THAT(out, HasSubstr("event: end\ndata: Cancelled\n\n"));
}

// Everything a streamed body gives (kWait counts as done: nothing more now).
std::string drain(BodyStream& stream) {
  std::string out, piece;
  BodyStream::Next next;
  do {
    piece.clear();
    next = stream.next(piece, 4096);
    out += piece;
  } while (next == BodyStream::Next::kData);
  return out;
}

// On a PostgreSQL farm the scheduler stores logs in the database
// (log_store.h; SQLite holds the same tables): the download streams the
// stored copy over the file, a corrupt one is a 500 naming it.
TEST_F(PagesTest, LogsStoredInTheDatabaseAreServedOverTheFiles) {
  {
    scheduler::StateDb db(fx_.stateDir() + "/scheduler.sqlite");
    scheduler::storeFinishedLog(db, fx_.helloStep, 2,
                                scheduler::compressLog("from the database\n"));
  }
  std::string l = "/build/" + std::to_string(fx_.hello) + "/log";
  Response r = get(l);
  ASSERT_EQ(r.status, 200);
  ASSERT_TRUE(r.stream);
  EXPECT_THAT(r.contentType, HasSubstr("text/plain"));
  EXPECT_EQ(drain(*r.stream), "from the database\n");
  EXPECT_EQ(get(l + "?attempt=1").filePath,  // not stored: its file
            scheduler::stepLogPath(fx_.stateDir(), fx_.drv("hello"), 1));
  {
    scheduler::StateDb db(fx_.stateDir() + "/scheduler.sqlite");
    scheduler::storeFinishedLog(db, fx_.helloStep, 2, {18, "not zstd"});
  }
  Response bad = get(l);
  EXPECT_EQ(bad.status, 500);
  EXPECT_THAT(bad.body, HasSubstr("attempt 2 is corrupt"));
  EXPECT_THAT(get("/build/" + std::to_string(fx_.hello)).body,
              HasSubstr("is corrupt"));  // the page's tail says so
}

// The live log follows a running attempt's pieces in the database, and
// after the build finished waits for the stored row to send the rest.
TEST_F(PagesTest, LiveLogFollowsTheDatabasesPiecesUntilTheLogIsStored) {
  int64_t step = 0;
  {
    scheduler::StateDb db(fx_.stateDir() + "/scheduler.sqlite");
    scheduler::StepRow row;
    row.drvPath = fx_.drv("bash");
    step = db.upsertStep(row);
    db.startStep(step, "builder-1", 1);
    scheduler::appendLogChunks(db, {{step, 1, 0, "configuring\n"}});
  }
  Response r = get("/build/" + std::to_string(fx_.bash) + "/log/live");
  ASSERT_TRUE(r.stream);
  std::string out = drain(*r.stream);
  EXPECT_THAT(out, HasSubstr("data: configuring\n\n"));
  {
    scheduler::StateDb db(fx_.stateDir() + "/scheduler.sqlite");
    db.finishBuild(fx_.bash, 0, 1, "");
  }
  out.clear();
  EXPECT_EQ(r.stream->next(out, 4096), BodyStream::Next::kWait);
  {
    scheduler::StateDb db(fx_.stateDir() + "/scheduler.sqlite");
    scheduler::storeFinishedLog(db, step, 1,
                                scheduler::compressLog("configuring\nbuilt\n"));
  }
  out = drain(*r.stream);
  EXPECT_THAT(out, HasSubstr("data: built\n\n"));
  EXPECT_THAT(out, HasSubstr("event: end\ndata: Succeeded"));
}

TEST_F(PagesTest, JobHistoryRedirectsAndBadge) {
  std::string j = "/jobset/nixpkgs/trunk/job/hello";
  Response h = get(j);
  ASSERT_EQ(h.status, 200);
  EXPECT_THAT(h.body, HasSubstr("/build/" + std::to_string(fx_.helloBase)));
  Response latest = get(j + "/latest");
  EXPECT_EQ(latest.status, 302);
  EXPECT_EQ(latest.header("Location"),
            "/build/" + std::to_string(fx_.helloBase));
  EXPECT_EQ(get(j + "/latest-finished").status, 302);
  EXPECT_EQ(get("/jobset/nixpkgs/trunk/job/zlib/latest-finished").status, 404);
  Response badge = get(j + "/badge.svg");
  EXPECT_EQ(badge.contentType, "image/svg+xml");
  EXPECT_THAT(badge.body, HasSubstr("failing"));
  EXPECT_THAT(get("/jobset/nixpkgs/trunk/job/curl/badge.svg").body,
              HasSubstr("passing"));
}

TEST_F(PagesTest, QueueWorkersAndSearch) {
  EXPECT_THAT(get("/queue").body, HasSubstr("No running scheduler"));
  snap_ = std::make_shared<scheduler::SchedulerSnapshot>();
  snap_->takenMs = 1;
  snap_->queue = {{9, fx_.drv("big"), "aarch64-linux", "waiting",
                   "no worker for aarch64-linux"}};
  Response q = get("/queue");
  EXPECT_THAT(q.body, HasSubstr("no worker for aarch64-linux"));
  EXPECT_THAT(get("/workers").body, HasSubstr("none"));
  Response s = get("/search?q=hel");
  EXPECT_THAT(s.body, HasSubstr(">hello<"));
  auto m =
      nlohmann::json::parse(get("/api/search?q=" + std::string(32, 'o')).body);
  EXPECT_EQ(m["outputs"][0]["build"], fx_.helloBase);
  EXPECT_EQ(get("/search?q=" + std::string(500, 'x')).status, 400);
}

// Issue 13: each page also answers its data as JSON, three ways (Accept,
// ?format=json, the /api/ twin), and the three carry the same data.
TEST_F(PagesTest, EveryPageAnswersTheSameDataAsJsonThreeWays) {
  snap_ = std::make_shared<scheduler::SchedulerSnapshot>();
  snap_->takenMs = 1'700'000'000'000;
  snap_->queue = {{fx_.helloStep, fx_.drv("hello"), "x86_64-linux", "waiting",
                   "no free slot"}};
  snap_->workers = {{"builder-1", {"x86_64-linux"}, 2, 0, {}, {}, 0, 0, 0}};
  std::string e = std::to_string(fx_.eval);
  for (const std::string& path : std::vector<std::string>{
           "/", "/projects", "/jobset/nixpkgs/trunk", "/eval/" + e,
           "/eval/" + e + "/compare", "/build/" + std::to_string(fx_.hello),
           "/jobset/nixpkgs/trunk/job/hello", "/queue", "/workers",
           "/search?q=hel"}) {
    Response html = get(path);
    ASSERT_EQ(html.status, 200) << path << ": " << html.body;
    EXPECT_THAT(html.contentType, HasSubstr("text/html")) << path;
    std::string api = "/api" + (path == "/" ? "/overview" : path);
    std::string sep = path.find('?') == std::string::npos ? "?" : "&";
    std::vector<nlohmann::json> answers;
    for (auto r :
         {get(path, true), get(path + sep + "format=json"), get(api)}) {
      ASSERT_EQ(r.status, 200) << path << ": " << r.body;
      EXPECT_THAT(r.contentType, HasSubstr("application/json")) << path;
      auto m = nlohmann::json::parse(r.body);
      // The overview's clock-relative parts move between calls.
      for (const char* moving : {"nowMs", "failureRate", "history"})
        m.erase(moving);
      ASSERT_FALSE(m.empty()) << path;
      answers.push_back(std::move(m));
    }
    EXPECT_EQ(answers[0], answers[1]) << path;
    EXPECT_EQ(answers[0], answers[2]) << path;
  }
}

TEST(Html, EscapesFormatsAndDrawsBars) {
  EXPECT_EQ(htmlEscape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  EXPECT_EQ(formatDuration(42'000), "42s");
  EXPECT_EQ(formatDuration(185'000), "3m 05s");
  EXPECT_EQ(formatDuration(7'260'000), "2h 01m");
  EXPECT_EQ(formatBytes(512), "512 B");
  EXPECT_EQ(formatBytes(3 << 20), "3.0 MiB");
  EXPECT_EQ(formatTime(0), "—");
  EXPECT_EQ(formatTime(1'700'000'000'000), "2023-11-14 22:13:20 UTC");
  std::string svg = svgBars("t<", {1, 0.5}, {"a", "b"}, 1);
  EXPECT_THAT(svg, HasSubstr("<title>t&lt;</title>"));
  EXPECT_THAT(svg, HasSubstr("height=\"76\""));  // the full bar
  EXPECT_THAT(svg, HasSubstr("height=\"38\""));  // the half bar
}

}  // namespace
}  // namespace kiln::web
