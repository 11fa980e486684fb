#pragma once
// The worker daemon's test fixture (daemon_test.cc, daemon_failover_test.cc):
// fake schedulers on a fake transport (tests/support/fake_client_transport.h:
// no sockets), and a DaemonTest that turns a Daemon on the test's thread
// with a FakeClock. The real ZeroMQ connection is tested in
// tests/integration/worker_zmq_test.cc.

#include <gtest/gtest.h>

#include <functional>

#include "fake_client_transport.h"
#include "fake_pressure.h"
#include "kiln/common/clock.h"
#include "kiln/common/file.h"
#include "kiln/protocol/transfer.h"
#include "kiln/store/derivation.h"
#include "kiln/store/local_store.h"
#include "kiln/store/nar.h"
#include "kiln/worker/daemon.h"
#include "test_support.h"

namespace kiln::worker::fixture {

namespace proto = protocol;
using namespace std::chrono_literals;

// A NAR held in memory, as a Source that owns it.
class OwnedStringSource : public Source {
 public:
  explicit OwnedStringSource(std::string s) : s_(std::move(s)), src_(s_) {}
  size_t read(char* d, size_t n) override { return src_.read(d, n); }

 private:
  std::string s_;
  StringSource src_;
};

// An upload registered in the central store on commit.
class CentralTarget : public proto::TransferTarget {
 public:
  explicit CentralTarget(store::LocalStore& s) : store_(s) {}
  void write(std::string_view d) override { data_ += d; }
  void commit(const proto::TransferHeader& h) override {
    store::ValidPathInfo info(h.info.path);
    info.narHash = h.info.narHash;
    info.narSize = h.info.narSize;
    info.references = h.info.references;
    StringSource src(data_);
    store_.addFromNar(info, src);
  }
  void discard(const std::string&) noexcept override { data_.clear(); }

 private:
  store::LocalStore& store_;
  std::string data_;
};

// The scheduler side: a fake link (no socket), one TransferEndpoint for
// the one worker, the central store, and everything the worker sent.
class FakeScheduler {
 public:
  FakeScheduler(const std::string& stateDir, const std::string& storeDir,
                kiln::testing::FakeNetwork& net, std::string endpointName)
      : store(stateDir, store::StoreDir(storeDir)),
        endpoint(std::move(endpointName)),
        link(net.scheduler(endpoint)) {}

  // Handles what the worker sent since the last call.
  void pump() {
    for (auto& m : link->take()) {
      if (xfer && xfer->handle(m)) continue;
      received.push_back(m);
      if (auto* l = std::get_if<proto::LogChunk>(&m)) log += l->data;
      if (std::holds_alternative<proto::Hello>(m) && autoWelcome) welcome();
    }
  }

  void send(const proto::Message& m) { link->send(m); }

  void welcome() {
    send(proto::Welcome{"fake", 200, 64 << 10, adopt});
    xfer = std::make_unique<proto::TransferEndpoint>(
        [this](proto::Message&& m) { send(m); },
        [this](const proto::TransferHeader&,
               bool upload) -> std::unique_ptr<proto::TransferTarget> {
          if (!upload) throw Error("no");
          return std::make_unique<CentralTarget>(store);
        },
        [this](const proto::TransferOutcome& o) { uploads.push_back(o); },
        proto::TransferOptions{64 << 10, 8, 4, 100000, 60s});
  }

  // Sends every path the worker asks for (with its store info).
  void serve(const proto::NeedPaths& n) {
    for (auto& p : n.paths) {
      auto info = store.requirePathInfo(p);
      proto::TransferHeader h;
      h.stepId = n.stepId;
      h.info = {info.path, info.narHash, info.narSize, info.references, {}};
      StringSink nar;
      store::dumpPath(store.physicalPath(p), nar);
      xfer->startSend(false, h, std::make_unique<OwnedStringSource>(nar.s),
                      [](const proto::TransferOutcome&) {});
    }
  }

  template <class T>
  const T* last() const {
    for (auto it = received.rbegin(); it != received.rend(); ++it)
      if (auto* m = std::get_if<T>(&*it)) return m;
    return nullptr;
  }
  // How many messages of type T arrived (since `received` was cleared).
  template <class T>
  size_t count() const {
    size_t n = 0;
    for (auto& m : received) n += std::holds_alternative<T>(m);
    return n;
  }

  store::LocalStore store;
  std::string endpoint;
  std::shared_ptr<kiln::testing::FakeSchedulerLink> link;
  std::unique_ptr<proto::TransferEndpoint> xfer;
  std::vector<proto::Message> received;
  std::vector<proto::TransferOutcome> uploads;
  std::string log;
  bool autoWelcome = true;
  /// Welcome::adoptedSteps of the next Welcomes.
  std::vector<uint64_t> adopt;
};

// Runs a Daemon on the test's thread (Daemon::turn) against FakeSchedulers
// on a FakeNetwork, with a FakeClock: heartbeats, Hello retries and
// fail-over happen when the test moves the clock. Builders are real
// /bin/sh processes (unsandboxed).
class DaemonTest : public ::testing::Test {
 protected:
  /// Turns a test may wait for something: each waits at most 20 ms for a
  /// slot's event, so this bounds a failing wait, never a passing one.
  static constexpr int kMaxTurns = 3000;

  DaemonTest()
      : storeDir_(root_.path() + "/worker/store"),
        sched_(root_.path() + "/sched", storeDir_, net_, "fake://sched") {}

  void startDaemon() {
    DaemonConfig c;
    c.client.connect = sched_.endpoint;
    c.connector = net_.connector();
    c.clock = &clock_;
    c.schedulers = schedulers_;
    c.failoverAfter = failoverAfter_;
    c.client.insecurePlaintext = true;
    c.stateDir = root_.path() + "/worker";
    c.storeDir = storeDir_;
    c.workerId = "w1";
    c.systems = {"x86_64-linux"};
    c.supportedFeatures = {"big"};
    c.slots = 2;
    c.speedFactor = 1.5;
    c.debug = debug_;
    // The daemon's own logic, not a sandbox: builders run unsandboxed.
    c.launcher = std::make_shared<RealProcessLauncher>();
    c.platforms = {};  // builders run as they are (c.systems is given)
    c.sessionNice = sessionNice_;
    c.cores = cores_;
    c.pressure = pressure_;
    c.thresholds = thresholds_;
    daemon_ = std::make_unique<Daemon>(std::move(c));
  }

  // Turns the daemon, letting `s` answer, until `pred` holds. False after
  // kMaxTurns, or once a turn threw (error_ says why).
  bool pumpUntil(FakeScheduler& s, const std::function<bool()>& pred) {
    for (int i = 0; i < kMaxTurns; ++i) {
      s.pump();
      if (pred()) return true;
      if (ended_) return false;
      try {
        daemon_->turn();
      } catch (const std::exception& e) {
        error_ = e.what();
        ended_ = true;
      }
    }
    return false;
  }
  bool pumpUntil(const std::function<bool()>& pred) {
    return pumpUntil(sched_, pred);
  }

  bool pollUntilWelcomed() {
    return pumpUntil([&] { return daemon_->welcomed(); });
  }

  // A /bin/sh derivation reading input `in` (in the central store).
  proto::BuildStep step(uint64_t id, const std::string& name,
                        const std::string& script, const store::StorePath& in) {
    store::StoreDir dir(storeDir_);
    store::Derivation d;
    d.name = name;
    d.platform = "x86_64-linux";
    d.builder = "/bin/sh";
    d.args = {"-c", script};
    d.inputSrcs = {in};
    d.outputs["out"] = {};
    d.env = {{"builder", "/bin/sh"},
             {"name", name},
             {"out", ""},
             {"input", dir.printPath(in)},
             {"system", "x86_64-linux"}};
    store::DrvHashCache cache(
        dir, [](const store::StorePath& p) -> store::Derivation {
          throw Error("no input drv " + p.baseName());
        });
    store::fillOutputPaths(d, cache);
    proto::BuildStep m;
    m.stepId = id;
    m.drv = store::printDerivation(dir, d);
    m.drvPath = store::derivationPath(dir, d);
    auto info = sched_.store.requirePathInfo(in);
    m.roots = {in};
    m.inputs = {{in, info.narHash, info.narSize, info.references, {}}};
    m.maxSilentSec = 30;
    m.timeoutSec = 60;
    outPath_ = *d.outputs["out"].path;
    return m;
  }

  TempDir root_{"daemon-test"};
  std::string storeDir_;
  FakeClock clock_;
  kiln::testing::FakeNetwork net_;
  FakeScheduler sched_;
  std::unique_ptr<Daemon> daemon_;
  std::string error_;
  DebugFaults debug_;
  /// DaemonConfig::schedulers (empty: `sched_` alone) and failoverAfter.
  std::vector<std::string> schedulers_;
  std::chrono::milliseconds failoverAfter_{5000};
  std::shared_ptr<SessionNice> sessionNice_;
  unsigned cores_ = 0;
  /// DaemonConfig::pressure (the machine's figures) and thresholds.
  std::shared_ptr<kiln::testing::FakePressureSource> pressure_ =
      std::make_shared<kiln::testing::FakePressureSource>();
  proto::PressureThresholds thresholds_;
  bool ended_ = false;  ///< a turn threw (error_ is set)
  store::StorePath outPath_{"00000000000000000000000000000000-x"};
};

}  // namespace kiln::worker::fixture
