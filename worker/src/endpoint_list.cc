// The schedulers a worker may follow, round-robin (docs/worker.md,
// "Fail-over").
#include "kiln/worker/endpoint_list.h"

#include <algorithm>

#include "kiln/common/error.h"

namespace kiln::worker {
namespace {

std::string trimmed(const std::string& s) {
  auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// Whether `port` is a decimal port number (1..65535).
bool isPort(const std::string& port) {
  if (port.empty() || port.size() > 5) return false;
  if (!std::all_of(port.begin(), port.end(),
                   [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  int n = std::stoi(port);
  return n >= 1 && n <= 65535;
}

// Throws Error unless `e` looks like a ZeroMQ endpoint a worker can
// connect to (ZeroMQ itself checks the rest when connecting).
void checkEndpoint(const std::string& e) {
  auto sep = e.find("://");
  if (sep == std::string::npos || sep == 0 || sep + 3 == e.size())
    throw Error("scheduler endpoint '" + e +
                "' is not TRANSPORT://ADDRESS (e.g. tcp://HOST:PORT)");
  if (e.compare(0, sep, "tcp") != 0) return;
  std::string address = e.substr(sep + 3);
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 ||
      !isPort(address.substr(colon + 1)))
    throw Error("scheduler endpoint '" + e + "' is not tcp://HOST:PORT");
}

}  // namespace

std::vector<std::string> EndpointList::parse(
    const std::vector<std::string>& specs) {
  std::vector<std::string> out;
  for (auto& spec : specs) {
    size_t start = 0;
    while (start <= spec.size()) {
      auto comma = std::min(spec.find(',', start), spec.size());
      std::string e = trimmed(spec.substr(start, comma - start));
      start = comma + 1;
      if (e.empty()) continue;
      checkEndpoint(e);
      if (std::find(out.begin(), out.end(), e) != out.end())
        throw Error("scheduler endpoint '" + e + "' is given twice");
      out.push_back(e);
    }
  }
  if (out.empty()) throw Error("no scheduler endpoint given");
  return out;
}

EndpointList::EndpointList(std::vector<std::string> endpoints,
                           std::chrono::milliseconds pauseMin,
                           std::chrono::milliseconds pauseMax)
    : endpoints_(std::move(endpoints)),
      pauseMin_(pauseMin),
      pauseMax_(std::max(pauseMin, pauseMax)),
      pause_(pauseMin) {
  if (endpoints_.empty()) throw Error("no scheduler endpoint given");
}

std::chrono::milliseconds EndpointList::next() {
  index_ = (index_ + 1) % endpoints_.size();
  if (++triedSinceAnswer_ % endpoints_.size() != 0)
    return std::chrono::milliseconds(0);
  auto pause = pause_;
  pause_ = std::min(pause_ * 2, pauseMax_);
  return pause;
}

void EndpointList::answered() {
  triedSinceAnswer_ = 0;
  pause_ = pauseMin_;
}

}  // namespace kiln::worker
