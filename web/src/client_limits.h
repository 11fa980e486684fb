#pragma once
// What each client of the HTTP server holds (connections, long-lived
// streams), counted against a limit per client address and a limit in
// all, so that one address cannot take what every other client needs.

#include <cstddef>
#include <string>
#include <unordered_map>

#include "kiln/common/sync.h"

namespace kiln::web {

/// Counts units (connections or streams) per client address. Thread-safe.
class ClientCounter {
 public:
  /// At most `total` units in all and `perClient` per address (0: none).
  ClientCounter(size_t total, size_t perClient)
      : maxTotal_(total), maxPerClient_(perClient) {}
  /// Takes one unit for `client`; false, taking nothing, when the client
  /// or everyone together is at the limit.
  bool tryTake(const std::string& client);
  /// Gives back a unit `client` took.
  void give(const std::string& client);
  /// Units taken now, in all and by `client`.
  size_t total() const;
  size_t of(const std::string& client) const;
  size_t maxTotal() const { return maxTotal_; }
  size_t maxPerClient() const { return maxPerClient_; }

 private:
  struct Counts {
    std::unordered_map<std::string, size_t> byClient;
    size_t total = 0;
  };
  size_t maxTotal_;
  size_t maxPerClient_;
  mutable Sync<Counts> counts_;
};

/// One unit taken from a ClientCounter, given back when released or
/// destroyed (at most once). Empty when default-constructed.
class ClientSlot {
 public:
  ClientSlot() = default;
  /// Takes a unit for `client`; the slot is empty (`!taken()`) when the
  /// counter refused. `counter` must outlive the slot.
  ClientSlot(ClientCounter& counter, std::string client);
  ~ClientSlot() { release(); }
  ClientSlot(ClientSlot&& o) noexcept;
  ClientSlot& operator=(ClientSlot&& o) noexcept;
  ClientSlot(const ClientSlot&) = delete;
  ClientSlot& operator=(const ClientSlot&) = delete;
  bool taken() const { return counter_ != nullptr; }
  /// Gives the unit back now (no-op when empty).
  void release();

 private:
  ClientCounter* counter_ = nullptr;
  std::string client_;
};

}  // namespace kiln::web
