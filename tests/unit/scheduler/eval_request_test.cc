// On-demand evaluations (`kiln jobset eval`) run off the service thread:
// while one runs, the service keeps answering other requests, and the
// eval request is answered with the evaluation's id when it ends; its
// eval.started notification is written when it starts, not when it ends.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "kiln/common/sqlite.h"
#include "kiln/scheduler/evaluation.h"
#include "kiln/scheduler/notification_outbox.h"
#include "kiln/scheduler/notification_store.h"
#include "kiln/scheduler/release_store.h"
#include "kiln/scheduler/service.h"
#include "service_fixture.h"
#include "test_support.h"

namespace kiln::scheduler {
namespace {

using ::testing::HasSubstr;

// Returns one job (`drv`) once released; counts its calls.
class GatedRunner : public EvalRunner {
 public:
  explicit GatedRunner(std::string drv) : drv_(std::move(drv)) {}
  std::vector<Job> evaluate(const JobsetSpec&, const Checkout&,
                            const EvalStore&) override {
    std::unique_lock lock(mu_);
    ++started_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
    Job ok{"a", "a", "x86_64-linux", drv_, {}, 0, 3600, 36000, "", {}, false};
    Job bad{"broken", "", "", "", {}, 0, 3600, 36000, "this job is broken", {}, false};
    return {ok, bad};
  }
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  bool waitStarted() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10),
                        [&] { return started_ > 0; });
  }

 private:
  std::string drv_;
  std::mutex mu_;
  std::condition_variable cv_;
  int started_ = 0;
  bool released_ = false;
};

class FixedFetcher : public InputFetcher {
 public:
  Checkout fetch(const JobsetSpec&, const std::string& workDir) override {
    return {workDir, "sha256:fixed", workDir};
  }
};

// The events of the outbox rows in `state`'s database, in order (read on
// a connection of its own while the service runs).
std::vector<std::string> outboxEvents(const std::string& state) {
  StateDb db(state + "/scheduler.sqlite", StateDb::ReadOnly{});
  std::vector<std::string> out;
  for (auto& r : NotificationStore(db).pending(100)) out.push_back(r.event);
  return out;
}

TEST(EvalRequest, AnsweredWhenTheEvaluationEndsWhileOtherRequestsAreServed) {
  TempDir dir("kiln-evalreq");
  std::string state = dir.path() + "/state";
  std::string drv;
  {
    store::LocalStore store(state);
    drv = testing::makeDrv(store, "a");
  }
  auto runner = std::make_shared<GatedRunner>(drv);
  ServiceConfig cfg = testing::testConfig(state);
  cfg.evalRunner = runner;
  cfg.inputFetcher = std::make_shared<FixedFetcher>();
  cfg.eventSinks.push_back(
      std::make_shared<NotificationOutbox>(std::vector<std::string>{"t"}));
  SchedulerService svc(cfg);
  svc.applyRequest("project-create", {{"name", "p"}});
  svc.applyRequest("jobset-create", {{"project", "p"},
                                     {"name", "j"},
                                     {"location", dir.path()},
                                     {"checkInterval", 0}});
  std::atomic<bool> stop{false};
  std::thread loop([&] { svc.run(stop); });

  nlohmann::json evalAnswer;
  std::string evalError;
  std::thread client([&] {
    try {
      evalAnswer = submitRequest(state, "jobset-eval",
                                 {{"project", "p"}, {"jobset", "j"}},
                                 std::chrono::seconds(30));
    } catch (const std::exception& e) {
      evalError = e.what();
    }
  });
  ASSERT_TRUE(runner->waitStarted());
  EXPECT_EQ(outboxEvents(state), std::vector<std::string>{"eval.started"});
  // The evaluation is blocked; the service still answers.
  nlohmann::json queue =
      submitRequest(state, "queue", {}, std::chrono::seconds(10));
  EXPECT_TRUE(queue.is_array());
  EXPECT_THROW(submitRequest(state, "jobset-eval",
                             {{"project", "p"}, {"jobset", "nope"}},
                             std::chrono::seconds(10)),
               Error);
  runner->release();
  client.join();
  stop = true;
  loop.join();
  ASSERT_EQ(evalError, "");
  ASSERT_TRUE(evalAnswer.contains("eval")) << evalAnswer.dump();
  int64_t evalId = evalAnswer["eval"].get<int64_t>();
  EXPECT_GT(evalId, 0);
  auto builds = svc.db().buildsOfEval(evalId);
  ASSERT_EQ(builds.size(), 1u);
  EXPECT_EQ(builds[0].drvPath, drv);
  EXPECT_EQ(outboxEvents(state),
            (std::vector<std::string>{"eval.started", "eval.finished",
                                      "build.queued", "eval.queued"}));
}

// Returns one job named after itself; records the jobsets it evaluated.
class NamedRunner : public EvalRunner {
 public:
  NamedRunner(std::string name, std::string drv)
      : name_(std::move(name)), drv_(std::move(drv)) {}
  std::vector<Job> evaluate(const JobsetSpec& js, const Checkout&,
                            const EvalStore&) override {
    seen.push_back(js.name);
    return {Job{name_, name_, "x86_64-linux", drv_, {}, 0, 3600, 36000, "", {}, false}};
  }
  std::vector<std::string> seen;

 private:
  std::string name_, drv_;
};

// Each jobset is evaluated by the runner of the evaluator it chose.
TEST(EvalRequest, EachJobsetUsesItsOwnEvaluator) {
  TempDir dir("kiln-evalchoice");
  std::string state = dir.path() + "/state";
  std::string drv;
  {
    store::LocalStore store(state);
    drv = testing::makeDrv(store, "a");
  }
  auto builtin = std::make_shared<NamedRunner>("by-builtin", drv);
  auto nix = std::make_shared<NamedRunner>("by-nix", drv);
  ServiceConfig cfg = testing::testConfig(state);
  cfg.evalRunners = {{"builtin", builtin}, {"nix", nix}};
  cfg.inputFetcher = std::make_shared<FixedFetcher>();
  SchedulerService svc(cfg);
  svc.applyRequest("project-create", {{"name", "p"}});
  auto mk = [&](const std::string& name, const char* evaluator) {
    nlohmann::json a{{"project", "p"},
                     {"name", name},
                     {"location", dir.path()},
                     {"checkInterval", 0}};
    if (evaluator) a["evaluator"] = evaluator;
    return svc.applyRequest("jobset-create", a)["id"].get<int64_t>();
  };
  int64_t plain = mk("plain", nullptr), viaNix = mk("via-nix", "nix");
  EXPECT_THROW(mk("other", "guile"), SchedulerStateError);
  int64_t e1 = svc.evaluateJobset(plain, true);
  int64_t e2 = svc.evaluateJobset(viaNix, true);
  EXPECT_EQ(builtin->seen, std::vector<std::string>{"plain"});
  EXPECT_EQ(nix->seen, std::vector<std::string>{"via-nix"});
  EXPECT_EQ(svc.db().buildsOfEval(e1).at(0).job, "by-builtin");
  EXPECT_EQ(svc.db().buildsOfEval(e2).at(0).job, "by-nix");
}

// jobset-create and jobset-update accept any loaded evaluator plugin and
// refuse another name, listing the loaded ones; nothing is written.
TEST(EvalRequest, AJobsetNamesOnlyALoadedEvaluator) {
  TempDir dir("kiln-evalnames");
  plugins::PluginRegistry registry;
  registry.loadDirectories({test::testPluginDir() + "/good"});
  ServiceConfig cfg = testing::testConfig(dir.path() + "/state");
  cfg.plugins = &registry;
  SchedulerService svc(cfg);
  svc.applyRequest("project-create", {{"name", "p"}});
  nlohmann::json a{{"project", "p"},
                   {"name", "j"},
                   {"location", dir.path()},
                   {"evaluator", "guile"}};
  try {
    svc.applyRequest("jobset-create", a);
    ADD_FAILURE() << "an evaluator that is not loaded was accepted";
  } catch (const SchedulerStateError& e) {
    EXPECT_THAT(e.what(), HasSubstr("jobset 'j': no evaluator plugin named "
                                    "'guile' (loaded evaluator plugins: "
                                    "test-evaluator-minor3, test-evaluator;"));
  }
  EXPECT_FALSE(svc.db().jobsetByName("p", "j"));
  a["evaluator"] = "test-evaluator";
  svc.applyRequest("jobset-create", a);
  EXPECT_EQ(svc.db().jobsetByName("p", "j")->evaluator, "test-evaluator");
  nlohmann::json edit{{"project", "p"}, {"jobset", "j"}, {"evaluator", "nix"}};
  EXPECT_THROW(svc.applyRequest("jobset-update", edit), SchedulerStateError);
  EXPECT_EQ(svc.db().jobsetByName("p", "j")->evaluator, "test-evaluator");
  edit["evaluator"] = "bad name";  // not even a plugin name: the database
  EXPECT_THROW(svc.applyRequest("jobset-update", edit), SchedulerStateError);
}

// A jobset whose evaluator plugin is no longer loaded (chosen while it
// was, the scheduler restarted without it): that evaluation fails, naming
// the jobset and what is loaded; the service goes on, and the jobset's
// other fields can still be edited.
TEST(EvalRequest, AnEvaluatorThatIsNotLoadedFailsTheEvaluationOnly) {
  TempDir dir("kiln-evalmissing");
  std::string state = dir.path() + "/state";
  int64_t js = 0;
  {
    plugins::PluginRegistry registry;
    registry.loadDirectories({test::testPluginDir() + "/good"});
    ServiceConfig cfg = testing::testConfig(state);
    cfg.plugins = &registry;
    SchedulerService svc(cfg);
    svc.applyRequest("project-create", {{"name", "p"}});
    js = svc.applyRequest("jobset-create", {{"project", "p"},
                                            {"name", "j"},
                                            {"location", dir.path()},
                                            {"checkInterval", 0},
                                            {"evaluator", "test-evaluator"}})
             ["id"]
                 .get<int64_t>();
  }
  plugins::PluginRegistry none;  // nothing loaded
  ServiceConfig cfg = testing::testConfig(state);
  cfg.plugins = &none;
  cfg.inputFetcher = std::make_shared<FixedFetcher>();
  SchedulerService svc(cfg);
  for (int i = 0; i < 2; i++) {
    auto failed = svc.db().evaluation(svc.evaluateJobset(js, true));
    ASSERT_TRUE(failed.has_value());
    EXPECT_THAT(failed->error,
                HasSubstr("jobset 'j': no evaluator plugin named "
                          "'test-evaluator' (loaded evaluator plugins: none"));
  }
  svc.applyRequest("jobset-update",
                   {{"project", "p"}, {"jobset", "j"}, {"shares", 7}});
  EXPECT_EQ(svc.db().jobset(js)->shares, 7);
}


// jobset-create and jobset-update read the declaration fields alike: the
// same fields, and `arguments` must be an object for both (nothing is
// written otherwise); fields an update does not name keep their values.
TEST(EvalRequest, CreateAndUpdateReadTheSameJobsetFields) {
  TempDir dir("kiln-jobsetfields");
  SchedulerService svc(testing::testConfig(dir.path() + "/state"));
  svc.applyRequest("project-create", {{"name", "p"}});
  nlohmann::json a{{"project", "p"},
                   {"name", "j"},
                   {"location", dir.path()},
                   {"arguments", "not an object"}};
  EXPECT_THROW(svc.applyRequest("jobset-create", a), SchedulerStateError);
  EXPECT_FALSE(svc.db().jobsetByName("p", "j"));
  a["arguments"] = {{"n", "3"}};
  a["shares"] = 7;
  a["repeatFraction"] = 0.25;
  nlohmann::json made = svc.applyRequest("jobset-create", a);
  EXPECT_EQ(made["kind"], "path");
  EXPECT_EQ(made["file"], "default.nix");
  EXPECT_EQ(made["checkInterval"], 300);
  EXPECT_EQ(made["channelJob"], "tested");
  EXPECT_EQ(made["shares"], 7);
  nlohmann::json edit{{"project", "p"},
                      {"jobset", "j"},
                      {"arguments", nlohmann::json::array()}};
  EXPECT_THROW(svc.applyRequest("jobset-update", edit), SchedulerStateError);
  edit = {{"project", "p"}, {"jobset", "j"}, {"channelJob", "all"}};
  nlohmann::json changed = svc.applyRequest("jobset-update", edit);
  EXPECT_EQ(changed["channelJob"], "all");
  EXPECT_EQ(changed["shares"], 7);
  EXPECT_DOUBLE_EQ(changed["repeatFraction"].get<double>(), 0.25);
  EXPECT_EQ(svc.db().jobsetByName("p", "j")->arguments, R"({"n":"3"})");
}

// --max-source-size 0 keeps no sources: nothing is added to the store for
// them (an empty checkout used to be added, then refused as over the
// bound), and the evaluation records none; the default keeps them.
TEST(EvalRequest, AZeroSourceBoundKeepsNoSources) {
  TempDir dir("kiln-evalnosources");
  std::string drv;
  auto run = [&](const std::string& state, uint64_t bound) {
    {
      store::LocalStore store(state);
      drv = testing::makeDrv(store, "a");
    }
    ServiceConfig cfg = testing::testConfig(state);
    cfg.evalRunners = {{"builtin", std::make_shared<NamedRunner>("a", drv)}};
    cfg.inputFetcher = std::make_shared<FixedFetcher>();
    cfg.maxSourceBytes = bound;
    SchedulerService svc(cfg);
    svc.applyRequest("project-create", {{"name", "p"}});
    int64_t js = svc.applyRequest("jobset-create", {{"project", "p"},
                                                    {"name", "j"},
                                                    {"location", dir.path()},
                                                    {"checkInterval", 0}})["id"]
                     .get<int64_t>();
    int64_t eval = svc.evaluateJobset(js, true);
    bool stored = false;
    for (auto& e : std::filesystem::directory_iterator(state + "/store"))
      stored = stored || e.path().filename().string().ends_with("-source");
    return std::make_pair(evalSources(svc.db(), eval), stored);
  };
  auto [none, storedNone] = run(dir.path() + "/zero", 0);
  EXPECT_EQ(none, "");
  EXPECT_FALSE(storedNone);
  auto [kept, storedKept] = run(dir.path() + "/default", 1ull << 30);
  EXPECT_TRUE(kept.ends_with("-source")) << kept;
  EXPECT_TRUE(storedKept);
}

}  // namespace
}  // namespace kiln::scheduler
