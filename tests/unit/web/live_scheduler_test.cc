// The pages against a running scheduler service (no sockets: workers on a
// MemoryTransport, time on a FakeClock): cancelling a build whose steps
// are queued shows them cancelled on the build page and its JSON, the
// build cancelled on the evaluation page, and the queue page empty; the
// workers page lists a worker on the first read after it joined.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/web/pages.h"
#include "memory_service.h"

namespace kiln::web {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

class LiveSchedulerTest : public scheduler::testing::MemoryServiceTest {
 protected:
  void SetUp() override {
    MemoryServiceTest::SetUp();
    ctx_.stateDir = state_;
    ctx_.snapshot = [this] { return svc_->snapshot(); };
    addPageRoutes(router_, ctx_);
  }

  Response get(const std::string& path, bool json = false) {
    Request r;
    r.method = "GET";
    r.path = path;
    if (json) r.headers["accept"] = "application/json";
    return router_.handle(r);
  }
  nlohmann::json getJson(const std::string& path) {
    Response r = get(path, true);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    return nlohmann::json::parse(r.body);
  }

  WebContext ctx_;
  Router router_;
};

TEST_F(LiveSchedulerTest, ACancelledBuildsQueuedStepsShowCancelledEverywhere) {
  int64_t id = svc_->addBuild(jobset_, "b", b_);  // a queued, b waiting
  svc_->pollOnce(0ms);
  std::string page = "/build/" + std::to_string(id);
  auto before = getJson(page);
  EXPECT_EQ(before["step"]["statusName"], "queued");
  EXPECT_EQ(before["dependencies"][0]["statusName"], "queued");
  EXPECT_EQ(getJson("/queue")["total"], 2);

  svc_->applyRequest("build-cancel", {{"build", id}});
  svc_->pollOnce(0ms);
  auto after = getJson(page);
  EXPECT_EQ(after["build"]["statusName"], "cancelled");
  EXPECT_EQ(after["step"]["statusName"], "cancelled");
  EXPECT_EQ(after["step"]["statusLabel"], "Cancelled");
  ASSERT_EQ(after["dependencies"].size(), 1u);
  EXPECT_EQ(after["dependencies"][0]["drvPath"], a_);
  EXPECT_EQ(after["dependencies"][0]["statusName"], "cancelled");
  Response html = get(page);
  EXPECT_THAT(html.body, HasSubstr("st-cancelled\">Cancelled"));
  EXPECT_THAT(html.body, Not(HasSubstr("\"st st-queued\"")));

  auto eval = getJson("/eval/" + std::to_string(build(id).eval));
  ASSERT_EQ(eval["builds"]["rows"].size(), 1u);
  EXPECT_EQ(eval["builds"]["rows"][0]["statusName"], "cancelled");
  EXPECT_THAT(get("/eval/" + std::to_string(build(id).eval)).body,
              Not(HasSubstr("\"st st-queued\"")));

  auto queue = getJson("/queue");
  EXPECT_EQ(queue["total"], 0);
  EXPECT_TRUE(queue["steps"]["rows"].empty());
  EXPECT_THAT(get("/queue").body, Not(HasSubstr(a_)));
}

TEST_F(LiveSchedulerTest, TheFirstWorkersReadListsAWorkerThatJustJoined) {
  svc_->pollOnce(0ms);
  auto w = join("w1");  // returns once w1 holds its Welcome
  auto workers = getJson("/api/workers");
  ASSERT_EQ(workers["workers"].size(), 1u) << workers.dump();
  EXPECT_EQ(workers["workers"][0]["name"], "w1");
  auto w2 = join("w2");
  EXPECT_EQ(getJson("/api/workers")["workers"].size(), 2u);
}

}  // namespace
}  // namespace kiln::web
