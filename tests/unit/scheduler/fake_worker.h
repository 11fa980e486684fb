#pragma once
// A scripted worker, for driving the scheduler service over loopback
// (protocol::Client) or without sockets (protocol::MemoryTransport). It
// does what docs/protocol.md says a worker does, with "building" replaced
// by writing a fixed file as each output.

#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kiln/protocol/memory_transport.h"
#include "kiln/protocol/transfer.h"
#include "kiln/protocol/transport.h"
#include "kiln/store/derivation.h"
#include "kiln/store/nar.h"

namespace kiln::scheduler::testing {

class FakeWorker {
 public:
  /// A worker connected over ZeroMQ to `endpoint`.
  explicit FakeWorker(const std::string& endpoint, std::string id = "w1",
                      std::string storeDir = "/nix/store")
      : id_(std::move(id)), storeDir_(std::move(storeDir)) {
    client_ = std::make_unique<protocol::Client>(clientOptions(endpoint));
    send_ = [this](const protocol::Message& m) { return client_->send(m); };
    receive_ = [this](std::chrono::milliseconds t) {
      return client_->receive(t);
    };
    makeEndpoint();
  }
  /// A worker on an in-memory transport, as routing id `peer`; receiving
  /// never waits.
  FakeWorker(protocol::MemoryTransport& net, const std::string& peer,
             std::string id, std::string storeDir = "/nix/store")
      : id_(std::move(id)), storeDir_(std::move(storeDir)) {
    send_ = [&net, peer](const protocol::Message& m) {
      net.deliver(peer, m);
      return true;
    };
    receive_ = [this, &net, peer](std::chrono::milliseconds) {
      if (inbox_.empty())
        for (auto& m : net.take(peer)) inbox_.push_back(std::move(m));
      std::optional<protocol::Message> m;
      if (!inbox_.empty()) {
        m = std::move(inbox_.front());
        inbox_.pop_front();
      }
      return m;
    };
    makeEndpoint();
  }

  /// Sends Hello.
  void hello(uint32_t slots = 1,
             std::vector<std::string> systems = {"x86_64-linux"}) {
    protocol::Hello h;
    h.workerId = id_;
    h.storeDir = storeDir_;
    h.systems = std::move(systems);
    h.slots = slots;
    h.kilnVersion = "test";
    h.heldSteps = held;
    h.thresholds = thresholds;
    send_(h);
  }

  /// Receives what is waiting (up to `timeout` for the first message) and
  /// sends a heartbeat when one is due (unless `silent`).
  void pump(std::chrono::milliseconds timeout) {
    auto m = receive_(timeout);
    while (m) {
      if (!xfer_->handle(*m)) onMessage(*m);
      m = receive_(std::chrono::milliseconds(0));
    }
    auto now = std::chrono::steady_clock::now();
    if (welcomed && !silent &&
        now - lastBeat_ > std::chrono::milliseconds(50)) {
      lastBeat_ = now;
      send_(beat);
    }
  }

  /// Uploads every output of `step`: a file holding `contents`, announced
  /// with the NAR hash of a file holding `announced` (default: the same;
  /// a different text of equal length makes a corrupt transfer).
  void uploadOutputs(const protocol::BuildStep& step,
                     const std::string& contents,
                     std::optional<std::string> announced = std::nullopt) {
    store::StoreDir sd(storeDir_);
    auto n = step.drvPath.name();
    auto drv = store::parseDerivation(sd, step.drv, n.substr(0, n.size() - 4));
    for (auto& [name, out] : drv.outputs) {
      StringSink nar, claimed;
      store::dumpString(contents, nar);
      store::dumpString(announced.value_or(contents), claimed);
      protocol::TransferHeader h;
      h.stepId = step.stepId;
      h.outputName = name;
      h.info.path = *out.path;
      h.info.narHash = hashString(HashAlgo::kSha256, claimed.s);
      h.info.narSize = nar.s.size();
      h.info.references = reportReferences;
      pendingUploads++;
      xfer_->startSend(true, h, std::make_unique<OwnedSource>(nar.s),
                       [this](const protocol::TransferOutcome& o) {
                         pendingUploads--;
                         if (!o.ok) uploadErrors.push_back(o.error);
                       });
    }
  }
  /// Reports the end of a step.
  void result(uint64_t stepId, protocol::StepStatus status,
              const std::string& error = "") {
    protocol::StepResult r;
    r.stepId = stepId;
    r.status = status;
    r.errorMsg = error;
    r.startTimeMs = 1;
    r.stopTimeMs = 2;
    send_(r);
  }
  void send(const protocol::Message& m) { send_(m); }
  /// Sends a heartbeat now (a `silent` worker only beats when told to).
  void heartbeat() { send_(beat); }

  /// What its heartbeats say, and the thresholds of its next Hello.
  protocol::Heartbeat beat{0.0, 1u << 30, {}};
  protocol::PressureThresholds thresholds;
  bool welcomed = false;
  /// Hello::heldSteps of the next Hello, and the last Welcome's
  /// adoptedSteps.
  std::vector<protocol::HeldStep> held;
  std::vector<uint64_t> adopted;
  bool silent = false;
  std::optional<protocol::Refused> refused;
  std::optional<protocol::Bye> bye;
  std::vector<protocol::BuildStep> steps;
  std::vector<protocol::CancelStep> cancels;
  std::vector<protocol::Ack> acks;
  std::map<std::string, std::string> received;  // base name → NAR
  int pendingUploads = 0;
  /// The references uploadOutputs reports for every output (a liar's or an
  /// honest worker's; the scheduler registers what it scans).
  store::StorePathSet reportReferences;
  std::vector<std::string> uploadErrors;

 private:
  struct OwnedSource : Source {
    explicit OwnedSource(std::string s) : data(std::move(s)) {}
    size_t read(char* d, size_t len) override {
      size_t n = std::min(len, data.size() - pos);
      std::copy_n(data.data() + pos, n, d);
      pos += n;
      return n;
    }
    std::string data;
    size_t pos = 0;
  };
  struct Target : protocol::TransferTarget {
    Target(FakeWorker& w, const protocol::TransferHeader& h)
        : w(w), base(h.info.path.baseName()) {}
    void write(std::string_view d) override { buf.append(d); }
    void commit(const protocol::TransferHeader&) override {
      w.received[base] = buf;
    }
    void discard(const std::string&) noexcept override {}
    FakeWorker& w;
    std::string base, buf;
  };

  static protocol::ClientOptions clientOptions(const std::string& ep) {
    protocol::ClientOptions o;
    o.connect = ep;
    o.insecurePlaintext = true;
    o.linger = std::chrono::milliseconds(0);
    return o;
  }

  void makeEndpoint() {
    xfer_ = std::make_unique<protocol::TransferEndpoint>(
        [this](protocol::Message&& m) {
          if (!send_(m)) throw Error("fake worker: send failed");
        },
        [this](const protocol::TransferHeader& h, bool) {
          return std::make_unique<Target>(*this, h);
        },
        [](const protocol::TransferOutcome&) {});
  }

  void onMessage(const protocol::Message& m) {
    if (auto* w = std::get_if<protocol::Welcome>(&m)) {
      welcomed = true;
      adopted = w->adoptedSteps;
    }
    if (auto* r = std::get_if<protocol::Refused>(&m)) refused = *r;
    if (auto* b = std::get_if<protocol::Bye>(&m)) bye = *b;
    if (auto* s = std::get_if<protocol::BuildStep>(&m)) steps.push_back(*s);
    if (auto* c = std::get_if<protocol::CancelStep>(&m)) cancels.push_back(*c);
    if (auto* a = std::get_if<protocol::Ack>(&m)) acks.push_back(*a);
  }

  std::unique_ptr<protocol::Client> client_;
  std::function<bool(const protocol::Message&)> send_;
  std::function<std::optional<protocol::Message>(std::chrono::milliseconds)>
      receive_;
  std::deque<protocol::Message> inbox_;  // memory transport only
  std::string id_;
  std::string storeDir_;
  std::unique_ptr<protocol::TransferEndpoint> xfer_;
  std::chrono::steady_clock::time_point lastBeat_{};
};

/// Builds the step `w` received last: uploads its outputs (a file holding
/// `contents`), runs `until` (the test's loop of service and worker turns)
/// until the uploads are acknowledged, and reports success.
inline void buildLast(
    FakeWorker& w, const std::string& contents,
    const std::function<bool(const std::function<bool()>&)>& until) {
  auto step = w.steps.back();
  w.uploadOutputs(step, contents);
  ASSERT_TRUE(until([&] { return w.pendingUploads == 0; }));
  ASSERT_TRUE(w.uploadErrors.empty()) << w.uploadErrors.front();
  w.result(step.stepId, protocol::StepStatus::kSuccess);
}

/// Polls `service` and pumps each of `workers` until `pred` holds or
/// `timeout` has passed; returns whether it holds.
template <typename Service>
bool pumpUntil(Service& service, const std::vector<FakeWorker*>& workers,
               const std::function<bool()>& pred,
               std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred() && std::chrono::steady_clock::now() < deadline) {
    service.pollOnce(std::chrono::milliseconds(2));
    for (auto* w : workers) w->pump(std::chrono::milliseconds(2));
  }
  return pred();
}

}  // namespace kiln::scheduler::testing
