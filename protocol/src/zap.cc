#include "zap.h"

#include <signal.h>

#include <vector>

#include "kiln/common/logging.h"

namespace kiln::protocol {
namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";

std::string z85(std::string_view binaryKey) {
  char out[41];
  if (binaryKey.size() != 32 ||
      !zmq_z85_encode(out, reinterpret_cast<const uint8_t*>(binaryKey.data()),
                      32))
    return "";
  return out;
}

}  // namespace

ZapHandler::ZapHandler(zmq::context_t& ctx, AllowList allowed)
    : allowed_(std::move(allowed)),
      zap_(ctx, zmq::socket_type::rep),
      stopRx_(ctx, zmq::socket_type::pair),
      stopTx_(ctx, zmq::socket_type::pair) {
  zap_.set(zmq::sockopt::linger, 0);
  zap_.bind(kZapEndpoint);
  auto stop = "inproc://kiln-zap-stop-" +
              std::to_string(reinterpret_cast<uintptr_t>(this));
  stopRx_.bind(stop);
  stopTx_.connect(stop);
  thread_ = std::thread([this] { run(); });
}

ZapHandler::~ZapHandler() {
  try {
    stopTx_.send(zmq::str_buffer("stop"), zmq::send_flags::none);
  } catch (const zmq::error_t& e) {
    logError(std::string("stopping the ZAP handler: ") + e.what());
  }
  thread_.join();
}

void ZapHandler::run() noexcept {
  // Process-directed signals (SIGTERM to the scheduler) belong to the main
  // thread; here they would only interrupt the poll.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  try {
    std::vector<zmq::pollitem_t> items = {{zap_.handle(), 0, ZMQ_POLLIN, 0},
                                          {stopRx_.handle(), 0, ZMQ_POLLIN, 0}};
    for (;;) {
      zmq::poll(items, std::chrono::milliseconds(-1));
      if (items[1].revents & ZMQ_POLLIN) return;
      if (items[0].revents & ZMQ_POLLIN) answer();
    }
  } catch (const std::exception& e) {
    logError(std::string("ZAP handler stopped: ") + e.what());
  }
}

// Reads one request and always sends a reply (a REP socket must answer
// before it can read again); anything unexpected is a 500/400, never an
// escaping exception.
void ZapHandler::answer() noexcept {
  try {
    std::vector<zmq::message_t> req;
    if (!zmq::recv_multipart(zap_, std::back_inserter(req))) return;
    std::string status = "400", text = "unknown key", user;
    std::string requestId = req.size() > 1 ? req[1].to_string() : "";
    if (req.size() < 6 || req[0].to_string_view() != "1.0") {
      status = "500";
      text = "malformed ZAP request";
    } else if (req[5].to_string_view() != "CURVE" || req.size() < 7) {
      text = "only CURVE clients are accepted";
    } else {
      auto key = z85(req[6].to_string_view());
      auto address = req[3].to_string();
      if (auto* name = allowed_.find(key)) {
        status = "200";
        text = "OK";
        user = *name;
        logInfo("worker key '" + *name + "' authenticated from " + address);
      } else {
        ++refused_;
        logWarn("refused a connection from " + address + ": public key " + key +
                " is not in the allow-list");
      }
    }
    std::vector<zmq::const_buffer> reply = {
        zmq::str_buffer("1.0"), zmq::buffer(requestId), zmq::buffer(status),
        zmq::buffer(text),      zmq::buffer(user),      zmq::const_buffer()};
    zmq::send_multipart(zap_, reply);
  } catch (const std::exception& e) {
    logError(std::string("ZAP handler: ") + e.what());
  }
}

}  // namespace kiln::protocol
