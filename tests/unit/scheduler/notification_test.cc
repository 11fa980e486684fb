// The notification outbox and its delivery: backoff on a fake clock, order
// per build, a restart that resumes from the database, payloads.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "kiln/common/file.h"
#include "kiln/scheduler/notification_delivery.h"
#include "kiln/scheduler/notification_outbox.h"
#include "kiln/scheduler/state_db.h"
#include "test_support.h"

namespace kiln::scheduler {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Records what it was given; fails while `down` or for bodies `failOnce`
// names (once each).
class FakeNotifier final : public Notifier {
 public:
  std::optional<std::string> deliver(const std::string& event,
                                     const std::string& body) override {
    calls++;
    if (down) return "listener down";
    auto j = json::parse(body);
    std::string mark = j.value("mark", "");
    if (failOnce.erase(mark)) return "refused " + mark;
    got.push_back({event, j});
    return std::nullopt;
  }
  bool down = false;
  std::set<std::string> failOnce;
  int calls = 0;
  std::vector<std::pair<std::string, json>> got;
};

class NotificationTest : public ::testing::Test {
 protected:
  NotificationTest() { clock_.set(WallTime(1'700'000'000'000ms)); }
  // Queues a raw row for `target` under `key`, its body marked `mark`.
  int64_t queue(const std::string& key, const std::string& mark,
                const std::string& target = "hook") {
    NotificationStore s(db_);
    return s.add(target, key, "test", json{{"mark", mark}, {"key", key}}.dump(),
                 clock_.nowMs());
  }
  std::unique_ptr<NotificationDelivery> delivery() {
    DeliveryOptions o;
    o.initialBackoff = 1000ms;
    o.maxBackoff = 8000ms;
    return std::make_unique<NotificationDelivery>(
        DatabaseSpec{"", "", path_},
        std::map<std::string, std::shared_ptr<Notifier>>{{"hook", hook_}},
        clock_, o);
  }
  std::vector<std::string> marks() const {
    std::vector<std::string> out;
    for (auto& [e, j] : hook_->got) out.push_back(j["mark"]);
    return out;
  }
  // An unfinished build of job hello in a new evaluation (inputs `hash`)
  // of `js`, made in a new project "pkgs".
  BuildRow helloBuild(JobsetRow js, const std::string& hash) {
    js.project = db_.createProject({0, "pkgs", "", true});
    BuildRow b;
    b.jobset = db_.createJobset(js);
    b.eval = db_.createEvaluation({0, b.jobset, hash, 5, 6, 1, ""}, {});
    b.job = "hello";
    b.drvPath = "/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-hello.drv";
    b.id = db_.createBuild(b);
    return b;
  }

  TempDir dir_{"kiln-notify"};
  std::string path_ = dir_.path() + "/scheduler.sqlite";
  StateDb db_{path_};
  FakeClock clock_;
  std::shared_ptr<FakeNotifier> hook_ = std::make_shared<FakeNotifier>();
};

TEST_F(NotificationTest, FailuresBackOffExponentiallyUpToTheCap) {
  auto d = delivery();
  EXPECT_EQ(d->backoff(1), 1000ms);
  EXPECT_EQ(d->backoff(3), 4000ms);
  EXPECT_EQ(d->backoff(10), 8000ms);
  int64_t id = queue("build:1", "a");
  hook_->down = true;
  int64_t start = clock_.nowMs();
  EXPECT_EQ(d->deliverDue(), 0u);
  NotificationStore s(db_);
  EXPECT_EQ(s.row(id)->attempts, 1);
  EXPECT_EQ(s.row(id)->nextAttemptMs, start + 1000);
  EXPECT_EQ(s.row(id)->lastError, "listener down");
  clock_.advance(999ms);  // not due yet: no attempt
  d->deliverDue();
  EXPECT_EQ(hook_->calls, 1);
  clock_.advance(1ms);
  d->deliverDue();  // second failure: 2 s
  EXPECT_EQ(hook_->calls, 2);
  EXPECT_EQ(s.row(id)->nextAttemptMs, clock_.nowMs() + 2000);
  hook_->down = false;
  clock_.advance(1999ms);
  EXPECT_EQ(d->deliverDue(), 0u);
  clock_.advance(1ms);
  EXPECT_EQ(d->deliverDue(), 1u);
  EXPECT_EQ(s.row(id)->deliveredMs, clock_.nowMs());
  EXPECT_EQ(marks(), std::vector<std::string>{"a"});
  EXPECT_EQ(d->deliverDue(), 0u);  // delivered once
  EXPECT_EQ(hook_->calls, 3);
}

TEST_F(NotificationTest, OneBuildsNotificationsGoInOrderOthersDoNotWait) {
  queue("build:1", "1a");
  queue("build:2", "2a");
  queue("build:1", "1b");
  queue("build:2", "2b");
  hook_->failOnce = {"1a"};
  auto d = delivery();
  // 1a fails: the round ends for the target, nothing overtakes it.
  EXPECT_EQ(d->deliverDue(), 0u);
  EXPECT_TRUE(marks().empty());
  // Next round: build 1 waits for 1a's backoff, build 2 goes on.
  EXPECT_EQ(d->deliverDue(), 2u);
  EXPECT_EQ(marks(), (std::vector<std::string>{"2a", "2b"}));
  clock_.advance(1s);
  EXPECT_EQ(d->deliverDue(), 2u);
  EXPECT_EQ(marks(), (std::vector<std::string>{"2a", "2b", "1a", "1b"}));
}

TEST_F(NotificationTest, ARestartResumesFromTheDatabaseBackoffIncluded) {
  queue("build:1", "a");
  queue("build:1", "b");
  queue("build:1", "c");
  hook_->failOnce = {"b"};
  {
    auto d = delivery();
    EXPECT_EQ(d->deliverDue(), 1u);  // a; b failed
  }
  // A new process: its own connection, the same rows.
  StateDb reopened(path_);
  auto d = delivery();
  EXPECT_EQ(d->deliverDue(), 0u);  // b still backs off
  EXPECT_EQ(hook_->calls, 2);
  clock_.advance(1s);
  EXPECT_EQ(d->deliverDue(), 2u);
  EXPECT_EQ(marks(), (std::vector<std::string>{"a", "b", "c"}));
}

TEST_F(NotificationTest, RowsForAnUnconfiguredNotifierStayPending) {
  queue("build:1", "x", "gone");
  queue("build:1", "y");
  auto d = delivery();
  EXPECT_EQ(d->deliverDue(), 1u);
  NotificationStore s(db_);
  auto pending = s.pendingSummary();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].target, "gone");
  EXPECT_EQ(pending[0].count, 1);
}

TEST_F(NotificationTest, TheThreadDeliversWhatIsQueued) {
  auto d = delivery();
  d->start();
  queue("build:1", "a");
  d->wake();
  ASSERT_TRUE(test::pollUntil(
      [&] {
        return !d->registry()->Collect().empty() &&
               NotificationStore(db_).pendingSummary().empty();
      },
      10s));
  d.reset();  // joins the thread
  EXPECT_EQ(marks(), std::vector<std::string>{"a"});
}

// The idle poll waits on the service's clock: standing still, it neither
// spins nor moves time; once the test moves it by the poll, a row queued
// without a wake-up is delivered.
TEST_F(NotificationTest, TheIdlePollWaitsOnTheClock) {
  auto d = delivery();
  auto t0 = clock_.now();
  d->start();
  ASSERT_TRUE(test::pollUntil([&] { return clock_.blockedWaits() == 1; }, 10s));
  queue("build:1", "polled");  // no wake()
  EXPECT_EQ(clock_.now(), t0);
  clock_.advance(250ms);  // Options::idlePoll's default
  ASSERT_TRUE(test::pollUntil(
      [&] { return NotificationStore(db_).pendingSummary().empty(); }, 10s));
  d.reset();
  EXPECT_EQ(marks(), std::vector<std::string>{"polled"});
  EXPECT_EQ(clock_.now() - t0, 250ms);
}

// The outbox sink turns events into one row per notifier, with the rows'
// facts; a finished build carries its status and outputs.
TEST_F(NotificationTest, TheOutboxWritesOneRowPerNotifierWithTheFacts) {
  JobsetRow js;
  js.name = "trunk";
  js.location = "/src";
  BuildRow b = helloBuild(js, "sha256:x");
  int64_t j = b.jobset, ev = b.eval;
  int woken = 0;
  NotificationOutbox out({"hook", "cmd"}, [&] { woken++; });
  out.attach(db_);
  out.onLifecycleEvent({LifecycleEvent::Kind::kBuildQueued, 0, 0, b.id, 0}, 10);
  db_.setBuildOutputs(b.id, {{"out", "/nix/store/bbbb-hello"}});
  db_.finishBuild(b.id, 0, 20, "");
  out.onBuildEvent(
      {b.id, BuildEvent::Kind::kSucceeded, StepStatus::kSuccess, b.drvPath},
      20);
  // The evaluation's only build finished: eval.done follows, with counts.
  EXPECT_EQ(woken, 3);
  auto rows = NotificationStore(db_).pending(100);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[4].event, "eval.done");
  EXPECT_EQ(rows[4].orderingKey, "jobset:" + std::to_string(j));
  auto evalDone = json::parse(rows[4].payload);
  EXPECT_EQ(evalDone["counts"]["builds"], 1);
  EXPECT_EQ(evalDone["counts"]["succeeded"], 1);
  EXPECT_EQ(evalDone["counts"]["failed"], 0);
  EXPECT_EQ(evalDone["eval"]["inputsHash"], "sha256:x");
  EXPECT_EQ(rows[0].target, "hook");
  EXPECT_EQ(rows[1].target, "cmd");
  EXPECT_EQ(rows[0].payload, rows[1].payload);  // one event, one id
  EXPECT_EQ(rows[0].orderingKey, "build:" + std::to_string(b.id));
  auto queued = json::parse(rows[0].payload);
  auto done = json::parse(rows[2].payload);
  EXPECT_NE(queued["id"], done["id"]);
  EXPECT_EQ(queued["event"], "build.queued");
  EXPECT_EQ(done["event"], "build.finished");
  EXPECT_EQ(done["timeMs"], 20);
  EXPECT_EQ(done["build"]["jobset"]["project"], "pkgs");
  EXPECT_EQ(done["build"]["jobset"]["name"], "trunk");
  EXPECT_EQ(done["build"]["drv"], b.drvPath);
  EXPECT_EQ(done["build"]["statusName"], "success");
  EXPECT_EQ(done["build"]["outputs"]["out"], "/nix/store/bbbb-hello");
  EXPECT_FALSE(queued["build"].contains("status"));

  // The channel advanced to this evaluation: channel.advanced, ordered by
  // the jobset, with the evaluation and the channel job's build.
  out.onLifecycleEvent({LifecycleEvent::Kind::kChannelAdvanced, j, ev, b.id, 0},
                       30);
  rows = NotificationStore(db_).pending(100);
  ASSERT_EQ(rows.size(), 8u);  // after eval.done's two rows
  EXPECT_EQ(rows[6].event, "channel.advanced");
  EXPECT_EQ(rows[6].orderingKey, "jobset:" + std::to_string(j));
  auto advanced = json::parse(rows[6].payload);
  EXPECT_EQ(advanced["event"], "channel.advanced");
  EXPECT_EQ(advanced["jobset"]["name"], "trunk");
  EXPECT_EQ(advanced["eval"]["id"], ev);
  EXPECT_EQ(advanced["eval"]["inputsHash"], "sha256:x");
  EXPECT_EQ(advanced["build"]["id"], b.id);
  EXPECT_EQ(advanced["build"]["statusName"], "success");
}

// A build event names its evaluation's commit (a git jobset's) and its
// jobset's repository, without the credentials its URL holds.
TEST_F(NotificationTest, BuildEventsCarryTheEvaluatedCommit) {
  JobsetRow js;
  js.name = "main";
  js.kind = "git";
  js.location = "https://bot:s3cret@forge.example/octo/pkgs.git";
  js.branch = "main";
  std::string sha(40, 'c');
  BuildRow b = helloBuild(js, "git:" + sha);
  int64_t j = b.jobset, ev = b.eval;
  NotificationOutbox out({"hook"}, nullptr);
  out.attach(db_);
  json started =
      out.payload({LifecycleEvent::Kind::kBuildStarted, 0, 0, b.id, 0}, 10);
  EXPECT_EQ(started["eval"]["id"], ev);
  EXPECT_EQ(started["eval"]["revision"], sha);
  EXPECT_EQ(started["eval"]["inputsHash"], "git:" + sha);
  const json& jobset = started["build"]["jobset"];
  EXPECT_EQ(jobset["kind"], "git");
  EXPECT_EQ(jobset["location"], "https://forge.example/octo/pkgs.git");
  EXPECT_EQ(jobset["branch"], "main");
  EXPECT_EQ(started.dump().find("s3cret"), std::string::npos);
  json evalFinished =
      out.payload({LifecycleEvent::Kind::kEvalFinished, j, ev, 0, 0}, 11);
  EXPECT_EQ(evalFinished["eval"]["revision"], sha);
}

}  // namespace
}  // namespace kiln::scheduler
