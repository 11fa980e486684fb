#pragma once
// A scripted worker on protocol::Client, for driving the scheduler service
// over loopback until the real worker daemon exists. It does what
// docs/protocol.md says a worker does, with "building" replaced by writing
// a fixed file as each output.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kiln/protocol/transfer.h"
#include "kiln/protocol/transport.h"
#include "kiln/store/derivation.h"
#include "kiln/store/nar.h"

namespace kiln::scheduler::testing {

class FakeWorker {
 public:
  explicit FakeWorker(const std::string& endpoint, std::string id = "w1",
                      std::string storeDir = "/nix/store")
      : client_(clientOptions(endpoint)), id_(std::move(id)),
        storeDir_(std::move(storeDir)) {
    xfer_ = std::make_unique<protocol::TransferEndpoint>(
        [this](protocol::Message&& m) {
          if (!client_.send(m)) throw Error("fake worker: send failed");
        },
        [this](const protocol::TransferHeader& h, bool) {
          return std::make_unique<Target>(*this, h);
        },
        [](const protocol::TransferOutcome&) {});
  }

  /// Sends Hello.
  void hello(uint32_t slots = 1, std::vector<std::string> systems = {
                                     "x86_64-linux"}) {
    protocol::Hello h;
    h.workerId = id_;
    h.storeDir = storeDir_;
    h.systems = std::move(systems);
    h.slots = slots;
    h.kilnVersion = "test";
    client_.send(h);
  }

  /// Receives what is waiting (up to `timeout` for the first message) and
  /// sends a heartbeat when one is due (unless `silent`).
  void pump(std::chrono::milliseconds timeout) {
    auto m = client_.receive(timeout);
    while (m) {
      if (!xfer_->handle(*m)) onMessage(*m);
      m = client_.receive(std::chrono::milliseconds(0));
    }
    auto now = std::chrono::steady_clock::now();
    if (welcomed && !silent && now - lastBeat_ > std::chrono::milliseconds(50)) {
      lastBeat_ = now;
      client_.send(protocol::Heartbeat{0.0, 1u << 30, {}});
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
    client_.send(r);
  }
  void send(const protocol::Message& m) { client_.send(m); }

  bool welcomed = false;
  bool silent = false;
  std::optional<protocol::Refused> refused;
  std::optional<protocol::Bye> bye;
  std::vector<protocol::BuildStep> steps;
  std::vector<protocol::CancelStep> cancels;
  std::vector<protocol::Ack> acks;
  std::map<std::string, std::string> received;  // base name → NAR
  int pendingUploads = 0;
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

  void onMessage(const protocol::Message& m) {
    if (std::holds_alternative<protocol::Welcome>(m)) welcomed = true;
    if (auto* r = std::get_if<protocol::Refused>(&m)) refused = *r;
    if (auto* b = std::get_if<protocol::Bye>(&m)) bye = *b;
    if (auto* s = std::get_if<protocol::BuildStep>(&m)) steps.push_back(*s);
    if (auto* c = std::get_if<protocol::CancelStep>(&m)) cancels.push_back(*c);
    if (auto* a = std::get_if<protocol::Ack>(&m)) acks.push_back(*a);
  }

  protocol::Client client_;
  std::string id_;
  std::string storeDir_;
  std::unique_ptr<protocol::TransferEndpoint> xfer_;
  std::chrono::steady_clock::time_point lastBeat_{};
};

}  // namespace kiln::scheduler::testing
