#pragma once
// A fixture running the whole scheduler service without sockets or sleeps:
// workers on a protocol::MemoryTransport (FakeWorker), time on a
// FakeClock, a central store holding a (a leaf) and b (depending on a),
// and a jobset to add builds to.

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fake_worker.h"
#include "kiln/protocol/memory_transport.h"
#include "kiln/scheduler/notification_outbox.h"
#include "kiln/scheduler/service.h"
#include "service_fixture.h"
#include "test_support.h"

namespace kiln::scheduler::testing {

using namespace std::chrono_literals;

/// The service, its transport, clock and event sink; SetUp writes a and b
/// and creates project p with jobset j.
class MemoryServiceTest : public ::testing::Test {
 protected:
  TempDir dir_{"kiln-svc-mem"};
  std::string state_ = dir_.path() + "/state";
  FakeClock clock_{WallTime{std::chrono::hours(24 * 365 * 50)}};
  std::shared_ptr<protocol::MemoryTransport> net_ =
      std::make_shared<protocol::MemoryTransport>();
  std::shared_ptr<RecordingSink> sink_ = std::make_shared<RecordingSink>();
  /// Turns build events into notification rows for a notifier "hook".
  std::shared_ptr<NotificationOutbox> outbox_ =
      std::make_shared<NotificationOutbox>(std::vector<std::string>{"hook"});
  std::unique_ptr<SchedulerService> svc_;
  std::string a_, b_;
  int64_t jobset_ = 0;
  /// Changes start() makes to the configuration (limits), if set.
  std::function<void(ServiceConfig&)> configure_;

  void SetUp() override {
    {
      store::LocalStore store(state_);
      a_ = makeDrv(store, "a");
      b_ = makeDrv(store, "b", {a_});
    }
    start();
    svc_->applyRequest("project-create", {{"name", "p"}});
    auto js = svc_->applyRequest("jobset-create", {{"project", "p"},
                                                   {"name", "j"},
                                                   {"location", "/nowhere"},
                                                   {"checkInterval", 0}});
    jobset_ = js["id"].get<int64_t>();
  }

  void start() {
    ServiceConfig c = testing::testConfig(state_);
    c.transport = net_;
    c.clock = &clock_;
    c.heartbeatInterval = 1s;  // lost after 3 s of silence
    c.eventSinks = {sink_, outbox_};
    if (configure_) configure_(c);
    svc_ = std::make_unique<SchedulerService>(c);
  }

  // Turns of the service and the workers until `pred` holds. Only the
  // registrar thread (outputs being added to the store) takes real time.
  bool until(std::vector<FakeWorker*> ws, const std::function<bool()>& pred) {
    return test::pollUntil(
        [&] {
          svc_->pollOnce(0ms);
          for (auto* w : ws) w->pump(0ms);
          return pred();
        },
        10s);
  }

  std::unique_ptr<FakeWorker> join(const std::string& id) {
    auto w = std::make_unique<FakeWorker>(*net_, "peer-" + id, id);
    w->silent = true;  // heartbeats only when the test says so
    w->hello();
    EXPECT_TRUE(until({w.get()}, [&] { return w->welcomed; }));
    return w;
  }

  void buildLast(FakeWorker& w, const std::string& contents) {
    testing::buildLast(w, contents, [&](const std::function<bool()>& pred) {
      return until({&w}, pred);
    });
  }

  BuildRow build(int64_t id) { return *svc_->db().build(id); }
};

}  // namespace kiln::scheduler::testing
