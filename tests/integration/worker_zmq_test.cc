// The worker daemon over real ZeroMQ on loopback (plain text), against a
// protocol::Server playing the scheduler: the one test of the daemon's
// real transport (its unit tests use a fake one, tests/unit/worker/
// daemon_fixture.h). Issue 15: a worker whose SIGTERM landed inside a
// ZeroMQ send or receive instead of the poll exited 1; signals at every
// moment of Hello, Welcome and the first Heartbeat, and while messages
// keep coming, must not end run() with an error, and the Bye still goes
// out.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <thread>

#include "kiln/common/file.h"
#include "kiln/protocol/transport.h"
#include "kiln/worker/daemon.h"
#include "test_support.h"

namespace kiln::worker {
namespace {

namespace proto = protocol;
using namespace std::chrono_literals;

extern "C" void onStormSignal(int) {}

class WorkerZmq : public ::testing::Test {
 protected:
  ~WorkerZmq() override {
    if (daemon_) daemon_->stop();
    if (thread_.joinable()) thread_.join();
  }

  void startDaemon() {
    DaemonConfig c;
    c.client.connect = server_.endpoint();
    c.client.insecurePlaintext = true;
    c.stateDir = dir_.path() + "/worker";
    c.storeDir = dir_.path() + "/worker/store";
    c.workerId = "w1";
    c.systems = {"x86_64-linux"};
    c.launcher = std::make_shared<RealProcessLauncher>();
    c.platforms = {};
    daemon_ = std::make_unique<Daemon>(std::move(c));
    thread_ = std::thread([this] {
      try {
        daemon_->run();
      } catch (const std::exception& e) {
        error_ = e.what();
      }
      ended_ = true;
    });
  }

  // Receives until `type` arrived from the worker (30 s at most).
  bool receiveUntil(proto::MessageType type) {
    return test::pollUntil(
        [&] {
          auto r = server_.receive(20ms);
          if (!r) return false;
          peer_ = r->peer;
          return proto::typeOf(r->msg) == type;
        },
        30s);
  }

  TempDir dir_{"worker-zmq"};
  proto::Server server_{
      proto::ServerOptions{"tcp://127.0.0.1:*", true, {}, {}, 1000ms}};
  std::string peer_;
  std::unique_ptr<Daemon> daemon_;
  std::thread thread_;
  std::string error_;
  std::atomic<bool> ended_{false};
};

TEST_F(WorkerZmq, AWorkerSignalledThroughItsHandshakeStopsCleanly) {
  struct sigaction sa {}, old{};
  sa.sa_handler = onStormSignal;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGALRM, &sa, &old), 0);  // no SA_RESTART, like SIGTERM
  startDaemon();
  std::atomic<bool> calm{false};
  std::thread storm([&, target = thread_.native_handle()] {
    while (!calm.load() && !ended_.load()) {
      pthread_kill(target, SIGALRM);
      std::this_thread::sleep_for(50us);
    }
  });
  bool hello = receiveUntil(proto::MessageType::kHello);
  if (hello) server_.send(peer_, proto::Welcome{"zmq", 200, 64 << 10, {}});
  bool beat = hello && receiveUntil(proto::MessageType::kHeartbeat);
  // Messages keep the worker inside ZeroMQ receives (Acks of no step are
  // ignored) while the signals come.
  auto until = std::chrono::steady_clock::now() + 1s;
  while (beat && !ended_.load() && std::chrono::steady_clock::now() < until)
    server_.send(peer_,
                 proto::Ack{proto::MessageType::kStepResult, 999, true, ""});
  daemon_->stop();
  bool bye = receiveUntil(proto::MessageType::kBye);
  calm = true;
  storm.join();
  thread_.join();
  sigaction(SIGALRM, &old, nullptr);
  EXPECT_TRUE(beat);
  EXPECT_TRUE(bye);
  EXPECT_EQ(error_, "");
}

}  // namespace
}  // namespace kiln::worker
