#pragma once
// The worker daemon's test fixture (daemon_test.cc, daemon_failover_test.cc):
// a fake scheduler built on protocol::Server over loopback in plain text,
// and a DaemonTest that runs a Daemon against it on a thread of its own.

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "fake_pressure.h"
#include "kiln/common/file.h"
#include "kiln/protocol/transfer.h"
#include "kiln/protocol/transport.h"
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

// The scheduler side: a Server, one TransferEndpoint for the one worker,
// the central store, and everything the worker sent.
class FakeScheduler {
 public:
  FakeScheduler(const std::string& stateDir, const std::string& storeDir)
      : store(stateDir, store::StoreDir(storeDir)),
        server(
            proto::ServerOptions{"tcp://127.0.0.1:*", true, {}, {}, 1000ms}) {}

  // Receives and dispatches messages until `pred` holds (or 30 s pass).
  bool pumpUntil(const std::function<bool()>& pred) {
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      auto r = server.receive(20ms);
      if (!r) continue;
      peer = r->peer;
      if (xfer && xfer->handle(r->msg)) continue;
      received.push_back(r->msg);
      if (auto* l = std::get_if<proto::LogChunk>(&r->msg)) log += l->data;
      if (std::holds_alternative<proto::Hello>(r->msg) && autoWelcome)
        welcome();
    }
    return true;
  }

  void welcome() {
    server.send(peer, proto::Welcome{"fake", 200, 64 << 10, adopt});
    xfer = std::make_unique<proto::TransferEndpoint>(
        [this](proto::Message&& m) { server.send(peer, m); },
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

  store::LocalStore store;
  proto::Server server;
  std::unique_ptr<proto::TransferEndpoint> xfer;
  std::string peer;
  std::vector<proto::Message> received;
  std::vector<proto::TransferOutcome> uploads;
  std::string log;
  bool autoWelcome = true;
  /// Welcome::adoptedSteps of the next Welcomes.
  std::vector<uint64_t> adopt;
};

class DaemonTest : public ::testing::Test {
 protected:
  DaemonTest()
      : storeDir_(root_.path() + "/worker/store"),
        sched_(root_.path() + "/sched", storeDir_) {}

  ~DaemonTest() override {
    if (daemon_) daemon_->stop();
    if (thread_.joinable()) thread_.join();
  }

  void startDaemon() {
    DaemonConfig c;
    c.client.connect = sched_.server.endpoint();
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
    thread_ = std::thread([this] {
      try {
        daemon_->run();
      } catch (const std::exception& e) {
        error_ = e.what();
      }
      ended_ = true;
    });
  }

  bool pollUntilWelcomed() {
    return sched_.pumpUntil([&] { return daemon_->welcomed(); });
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
  FakeScheduler sched_;
  std::unique_ptr<Daemon> daemon_;
  std::thread thread_;
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
  std::atomic<bool> ended_{false};  ///< run() returned (error_ is set)
  store::StorePath outPath_{"00000000000000000000000000000000-x"};
};

}  // namespace kiln::worker::fixture
