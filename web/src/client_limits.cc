// Per-client counting of connections and streams (client_limits.h).
#include "client_limits.h"

#include <utility>

namespace kiln::web {

bool ClientCounter::tryTake(const std::string& client) {
  auto c = counts_.lock();
  if (c->total >= maxTotal_) return false;
  size_t& mine = c->byClient[client];
  if (mine >= maxPerClient_) {
    if (mine == 0) c->byClient.erase(client);
    return false;
  }
  mine++;
  c->total++;
  return true;
}

void ClientCounter::give(const std::string& client) {
  auto c = counts_.lock();
  auto it = c->byClient.find(client);
  if (it == c->byClient.end()) return;
  if (--it->second == 0) c->byClient.erase(it);
  c->total--;
}

size_t ClientCounter::total() const { return counts_.lock()->total; }

size_t ClientCounter::of(const std::string& client) const {
  auto c = counts_.lock();
  auto it = c->byClient.find(client);
  return it == c->byClient.end() ? 0 : it->second;
}

ClientSlot::ClientSlot(ClientCounter& counter, std::string client)
    : client_(std::move(client)) {
  if (counter.tryTake(client_)) counter_ = &counter;
}

ClientSlot::ClientSlot(ClientSlot&& o) noexcept
    : counter_(std::exchange(o.counter_, nullptr)),
      client_(std::move(o.client_)) {}

ClientSlot& ClientSlot::operator=(ClientSlot&& o) noexcept {
  if (this != &o) {
    release();
    counter_ = std::exchange(o.counter_, nullptr);
    client_ = std::move(o.client_);
  }
  return *this;
}

void ClientSlot::release() {
  if (auto* c = std::exchange(counter_, nullptr)) c->give(client_);
}

}  // namespace kiln::web
