#include "kiln/protocol/memory_transport.h"

#include <utility>

namespace kiln::protocol {

std::string MemoryTransport::endpoint() const { return "memory://"; }

std::optional<Received> MemoryTransport::receive(std::chrono::milliseconds,
                                                 int) {
  std::lock_guard lock(mutex_);
  if (inbox_.empty()) return std::nullopt;
  Received r = std::move(inbox_.front());
  inbox_.pop_front();
  return r;
}

bool MemoryTransport::send(const std::string& peer, const Message& msg) {
  Message copy = decode(encode(msg));  // the wire's validation
  std::lock_guard lock(mutex_);
  if (disconnected_.count(peer)) return false;
  outbox_[peer].push_back(std::move(copy));
  return true;
}

void MemoryTransport::deliver(const std::string& peer, const Message& msg,
                              const std::string& user) {
  Received r{peer, user, decode(encode(msg))};
  std::lock_guard lock(mutex_);
  inbox_.push_back(std::move(r));
}

std::vector<Message> MemoryTransport::take(const std::string& peer) {
  std::lock_guard lock(mutex_);
  auto it = outbox_.find(peer);
  if (it == outbox_.end()) return {};
  return std::exchange(it->second, {});
}

void MemoryTransport::setConnected(const std::string& peer, bool connected) {
  std::lock_guard lock(mutex_);
  if (connected)
    disconnected_.erase(peer);
  else
    disconnected_.insert(peer);
}

size_t MemoryTransport::pending() const {
  std::lock_guard lock(mutex_);
  return inbox_.size();
}

}  // namespace kiln::protocol
