// Release engineering's pages (docs/release.md) through the router against
// the fixture database: an aggregate build lists its constituents and names
// those that did not succeed; a jobset's channel is 404 until its job
// succeeds, then its page, API, history on the jobset page and the files
// below channel/latest (store-paths.xz decompressed, nixexprs.tar.xz
// unpacked by the system's tar, git-revision, binary-cache-url).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "kiln/common/file.h"
#include "kiln/common/stream.h"
#include "kiln/scheduler/release_store.h"
#include "kiln/scheduler/repeat_store.h"
#include "kiln/store/compression.h"
#include "kiln/web/model.h"
#include "kiln/web/pages.h"
#include "test_support.h"
#include "web_fixture.h"

namespace kiln::web {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class ReleasePagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_.stateDir = fx_.stateDir();
    addPageRoutes(router_, ctx_);
  }

  Response get(const std::string& path, bool asJson = false) {
    Request r;
    r.method = "GET";
    r.path = path;
    r.headers["host"] = "farm.example:8470";
    if (asJson) r.headers["accept"] = "application/json";
    return router_.handle(r);
  }

  scheduler::StateDb db() {
    return scheduler::StateDb(fx_.stateDir() + "/scheduler.sqlite");
  }

  /// A build of `job` in the fixture's newest evaluation.
  int64_t addBuild(scheduler::StateDb& db, const std::string& job, int status) {
    scheduler::BuildRow b;
    b.eval = fx_.eval;
    b.jobset = fx_.jobset;
    b.job = job;
    b.drvPath = testing::WebFixture::drv(job);
    int64_t id = db.createBuild(b);
    db.setBuildOutputs(id, {{"out", testing::WebFixture::out(job)}});
    if (status >= 0) db.finishBuild(id, status, 1'700'000'000'000, "");
    return id;
  }

  /// The step of `job`'s derivation.
  static int64_t addStep(scheduler::StateDb& db, const std::string& job) {
    scheduler::StepRow s;
    s.drvPath = testing::WebFixture::drv(job);
    s.system = "x86_64-linux";
    s.createdMs = 1;
    return db.upsertStep(s);
  }

  static std::string unxz(const std::string& data) {
    StringSource in(data);
    auto src = store::makeDecompressionSource("xz", in);
    StringSink out;
    src->drainInto(out);
    return out.s;
  }

  testing::WebFixture fx_;
  WebContext ctx_;
  Router router_;
};

TEST_F(ReleasePagesTest, AnAggregateListsItsConstituentsAndNamesTheFailed) {
  auto d = db();
  int64_t tested = addBuild(d, "tested", 2);
  int64_t docs = addBuild(d, "docs", 0);
  scheduler::addAggregateConstituents(
      d, {{tested, fx_.hello}, {tested, docs}, {tested, fx_.bash}});
  json m = json::parse(get("/api/build/" + std::to_string(tested)).body);
  auto& a = m["aggregate"];
  ASSERT_TRUE(a.is_object()) << m.dump(2);
  EXPECT_EQ(a["failed"], json::array({"hello"}));
  EXPECT_EQ(a["unfinished"], 1);
  ASSERT_EQ(a["constituents"].size(), 3u);
  EXPECT_EQ(a["constituents"][0]["job"], "bash");
  EXPECT_EQ(a["constituents"][1]["statusName"], "success");
  Response page = get("/build/" + std::to_string(tested));
  EXPECT_THAT(page.body, HasSubstr("<h2>Constituents</h2>"));
  EXPECT_THAT(page.body, HasSubstr("Did not succeed: hello"));
  EXPECT_THAT(page.body, HasSubstr("href=\"/build/" + std::to_string(docs)));
  // No aggregate: no section.
  EXPECT_TRUE(
      json::parse(get("/api/build/" + std::to_string(docs)).body)["aggregate"]
          .is_null());
  EXPECT_THAT(get("/build/" + std::to_string(docs)).body,
              ::testing::Not(HasSubstr("Constituents")));
}

TEST_F(ReleasePagesTest, TheChannelIsServedOnceItsJobSucceeded) {
  const std::string base = "/jobset/nixpkgs/trunk/channel/latest";
  Response none = get(base);
  EXPECT_EQ(none.status, 404);
  EXPECT_THAT(none.body, HasSubstr("has not advanced yet"));
  EXPECT_EQ(get(base + "/store-paths.xz").status, 404);
  EXPECT_EQ(get("/jobset/nixpkgs/nope/channel/latest").status, 404);
  json js = json::parse(get("/api/jobset/nixpkgs/trunk").body);
  EXPECT_EQ(js["channel"]["channelJob"], "tested");
  EXPECT_TRUE(js["channel"]["latest"].is_null());

  auto d = db();
  int64_t tested = addBuild(d, "tested", 0);
  ASSERT_TRUE(scheduler::advanceChannel(d, tested, 1'700'000'100'000));

  json m = json::parse(get("/api" + base).body);
  EXPECT_EQ(m["latest"]["eval"], fx_.eval);
  EXPECT_EQ(m["latest"]["build"], tested);
  EXPECT_EQ(m["advances"].size(), 1u);
  Response page = get(base);
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_THAT(page.body, HasSubstr("href=\"/eval/" + std::to_string(fx_.eval)));
  EXPECT_THAT(page.body, HasSubstr(base + "/store-paths.xz"));
  EXPECT_THAT(page.body, HasSubstr(base + "/git-revision"));  // a git jobset
  Response jobset = get("/jobset/nixpkgs/trunk");
  EXPECT_THAT(jobset.body, HasSubstr("<h2>Channel</h2>"));
  EXPECT_THAT(jobset.body, HasSubstr("id=\"channel-advances\""));

  Response paths = get(base + "/store-paths.xz");
  ASSERT_EQ(paths.status, 200) << paths.body;
  EXPECT_EQ(paths.contentType, "application/x-xz");
  std::string want;
  for (auto& p : scheduler::succeededOutputs(d, fx_.eval)) want += p + "\n";
  EXPECT_EQ(unxz(paths.body), want);
  EXPECT_THAT(want, HasSubstr(testing::WebFixture::out("tested")));

  EXPECT_EQ(get(base + "/binary-cache-url").body, "http://farm.example:8470\n");
  // The fixture's evaluation read git revision bbbb.
  EXPECT_EQ(get(base + "/git-revision").body, "bbbb\n");
  // No sources kept yet.
  EXPECT_EQ(get(base + "/nixexprs.tar.xz").status, 404);
}

TEST_F(ReleasePagesTest, NixexprsHoldsTheEvaluatedSourcesForTar) {
  auto d = db();
  ASSERT_TRUE(scheduler::advanceChannel(d, addBuild(d, "tested", 0), 1));
  std::string base = std::string(32, 's') + "-source";
  std::string tree = fx_.stateDir() + "/store/" + base;
  std::string longName(120, 'n');
  createDirs(tree + "/pkgs/" + longName);
  writeFile(tree + "/default.nix", "{ }: { }\n");
  writeFile(tree + "/pkgs/" + longName + "/build.sh", "#!/bin/sh\necho hi\n");
  ::chmod((tree + "/pkgs/" + longName + "/build.sh").c_str(), 0555);
  ASSERT_EQ(::symlink("default.nix", (tree + "/link.nix").c_str()), 0);
  scheduler::setEvalSources(d, fx_.eval, "/nix/store/" + base);

  Response r = get("/jobset/nixpkgs/trunk/channel/latest/nixexprs.tar.xz");
  ASSERT_EQ(r.status, 200) << r.body;
  TempDir out("kiln-nixexprs");
  writeFile(out.path() + "/nixexprs.tar", unxz(r.body));
  auto x =
      test::run({"tar", "-xf", out.path() + "/nixexprs.tar", "-C", out.path()});
  ASSERT_EQ(x.exitCode, 0) << x.err;
  std::string top = out.path() + "/trunk";
  EXPECT_EQ(readFile(top + "/default.nix"), "{ }: { }\n");
  std::string script = top + "/pkgs/" + longName + "/build.sh";
  EXPECT_EQ(readFile(script), "#!/bin/sh\necho hi\n");
  struct stat st;
  ASSERT_EQ(::stat(script.c_str(), &st), 0);
  EXPECT_TRUE(st.st_mode & S_IXUSR);
  ASSERT_EQ(::lstat((top + "/link.nix").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  // The system's tar reads the same entries back.
  auto t = test::run({"tar", "-tf", out.path() + "/nixexprs.tar"});
  EXPECT_THAT(t.out, HasSubstr("trunk/pkgs/" + longName + "/build.sh"));
}

TEST_F(ReleasePagesTest, ARegressedEvaluationListsItsOffenders) {
  const std::string self = "/eval/" + std::to_string(fx_.eval);
  // (The evaluation pages share their model for a second: the one
  // without regressions is another evaluation.)
  const std::string other = "/eval/" + std::to_string(fx_.base);
  EXPECT_TRUE(json::parse(get("/api" + other).body)["regressions"].empty());
  EXPECT_THAT(get(other).body, ::testing::Not(HasSubstr("Regressed")));
  auto d = db();
  scheduler::recordRegressions(d, fx_.eval,
                               {{"curl", "closure", fx_.base, 1000, 1600},
                                {"zlib", "time", fx_.base, 20'000, 50'000}});
  json m = json::parse(get("/api" + self).body);
  ASSERT_EQ(m["regressions"].size(), 2u);
  EXPECT_EQ(m["regressions"][0]["job"], "curl");
  EXPECT_EQ(m["regressions"][0]["growthPercent"], 60.0);
  EXPECT_EQ(m["regressions"][1]["kind"], "time");
  std::string page = get(self).body;
  EXPECT_THAT(page, HasSubstr("id=\"regressed\""));
  EXPECT_THAT(page, HasSubstr("+150 %"));
  EXPECT_THAT(page, HasSubstr("closure size"));
  json compare = json::parse(get("/api" + self + "/compare").body);
  EXPECT_EQ(compare["regressions"].size(), 2u);
  EXPECT_THAT(get(self + "/compare").body, HasSubstr("id=\"regressed\""));
}

TEST_F(ReleasePagesTest, AJobChartsItsDurationsAndSizesOverEvaluations) {
  scheduler::StateView view(fx_.stateDir());
  PathSizeFn sizes = [](const std::string& path) -> std::optional<PathSize> {
    if (path != testing::WebFixture::out("hello-1.0")) return std::nullopt;
    return PathSize{1000, 5000};
  };
  json m = jobModel(view, "nixpkgs", "trunk", "hello", {0, 50}, sizes);
  auto& points = m["history"]["points"];
  ASSERT_EQ(points.size(), 2u) << m.dump(2);
  // Oldest first: the base evaluation's success (no step recorded for its
  // .drv), then the newest evaluation's failure (its step ran 42 s).
  EXPECT_EQ(points[0]["build"], fx_.helloBase);
  EXPECT_EQ(points[0]["statusName"], "success");
  EXPECT_TRUE(points[0]["durationMs"].is_null());
  EXPECT_EQ(points[0]["outputSize"], 1000);
  EXPECT_EQ(points[0]["closureSize"], 5000);
  EXPECT_EQ(points[1]["build"], fx_.hello);
  EXPECT_EQ(points[1]["eval"], fx_.eval);
  EXPECT_EQ(points[1]["durationMs"], 42'000);
  EXPECT_TRUE(points[1]["outputSize"].is_null());

  Response page = get("/jobset/nixpkgs/trunk/job/hello");
  ASSERT_EQ(page.status, 200);
  EXPECT_THAT(page.body, HasSubstr("id=\"job-history\""));
  for (auto* title : {"Build duration", "Output size", "Closure size"})
    EXPECT_THAT(page.body, HasSubstr(std::string("<title>") + title));
  EXPECT_THAT(page.body,
              HasSubstr("evaluation " + std::to_string(fx_.eval) + ", build " +
                        std::to_string(fx_.hello) + ": 42"));
  json api = json::parse(get("/api/jobset/nixpkgs/trunk/job/hello").body);
  EXPECT_EQ(api["history"]["points"].size(), 2u);
}

}  // namespace
}  // namespace kiln::web

namespace kiln::web {
namespace {

TEST_F(ReleasePagesTest, ANonDeterministicStepShowsOnItsBuildAndJobset) {
  auto d = db();
  int64_t odd = addBuild(d, "odd", 0);
  int64_t step = addStep(d, "odd");
  const std::string build = "/build/" + std::to_string(odd);
  EXPECT_TRUE(
      json::parse(get("/api" + build).body)["reproducibility"].is_null());
  // (The jobset page's model is shared for a second: not read before.)
  scheduler::addRepeatCheck(d, step, fx_.jobset, "w-one", 10);
  scheduler::startRepeatCheck(d, step, "w-two");
  scheduler::finishRepeatCheck(d, step, true, {false, {"out"}}, "/side", 20);
  scheduler::setRepeatReport(d, step, "-stamp 1234 <x>\n+stamp 9876\n");

  json m = json::parse(get("/api" + build).body);
  auto& r = m["reproducibility"];
  ASSERT_TRUE(r.is_object()) << m.dump(2);
  EXPECT_EQ(r["statusName"], "not-deterministic");
  EXPECT_EQ(r["secondWorker"], "w-two");
  EXPECT_EQ(r["differing"], json::array({"out"}));
  std::string page = get(build).body;
  EXPECT_THAT(page, HasSubstr("<h2>Reproducibility</h2>"));
  EXPECT_THAT(page, HasSubstr("st-not-deterministic"));
  EXPECT_THAT(page, HasSubstr("-stamp 1234 &lt;x&gt;"));
  EXPECT_THAT(page, HasSubstr("id=\"diffoscope-report\""));

  json js = json::parse(get("/api/jobset/nixpkgs/trunk").body);
  ASSERT_EQ(js["nonDeterministic"].size(), 1u) << js.dump(2);
  EXPECT_EQ(js["nonDeterministic"][0]["job"], "odd");
  EXPECT_EQ(js["nonDeterministic"][0]["build"], odd);
  EXPECT_THAT(get("/jobset/nixpkgs/trunk").body,
              HasSubstr("id=\"non-deterministic\""));
}

TEST_F(ReleasePagesTest, APendingCheckSaysWhyItWaits) {
  auto d = db();
  int64_t job = addBuild(d, "lonely", 0);
  scheduler::addRepeatCheck(d, addStep(d, "lonely"), fx_.jobset, "only-one",
                            10);
  const std::string build = "/build/" + std::to_string(job);
  EXPECT_EQ(json::parse(get("/api" + build).body)["reproducibility"]["waiting"],
            "no scheduler is running");
  auto snap = std::make_shared<scheduler::SchedulerSnapshot>();
  snap->workers.push_back({});
  snap->workers.back().name = "only-one";
  ctx_.snapshot = [snap] { return snap; };
  json r = json::parse(get("/api" + build).body)["reproducibility"];
  EXPECT_EQ(r["state"], "pending");
  EXPECT_THAT(r["waiting"].get<std::string>(),
              HasSubstr("a worker other than only-one, which built it first "
                        "and is the only worker connected"));
  EXPECT_THAT(get(build).body, HasSubstr("id=\"repeat-waiting\""));
}

}  // namespace
}  // namespace kiln::web
