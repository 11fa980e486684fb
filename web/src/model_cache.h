#pragma once
// The recently made models of the dashboard's costlier pages, shared by
// the requests of the same page (path and query) within a short time: a
// page that many people (or a load test) ask at once is made once per
// `ttl`, and the others wait for that one instead of all querying the
// state database at once. The overview has its own cache (pages_routes.cc).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/common/clock.h"

namespace kiln::web {

/// Models by key (a page's path and query), each made at most once per
/// `ttl` and shared. Thread-safe. At most `maxEntries` keys are kept; the
/// stale ones go first when it is full.
class ModelCache {
 public:
  /// Borrows `clock`, which must outlive the cache.
  ModelCache(const Clock& clock, std::chrono::milliseconds ttl,
             size_t maxEntries = 256);
  /// The model of `key`: the one made less than `ttl` ago, or a new one
  /// from `make` (whose exception reaches the caller and is not kept).
  /// Concurrent calls for one key make it once.
  nlohmann::json get(const std::string& key,
                     const std::function<nlohmann::json()>& make);
  /// Keys kept now.
  size_t size() const;

 private:
  struct Entry {
    std::mutex mu;                               // held while making
    std::atomic<int64_t> madeMs{INT64_MIN / 2};  // wall ms of `model`
    nlohmann::json model;
  };
  bool fresh(const Entry& e, int64_t now) const;
  std::shared_ptr<Entry> entry(const std::string& key, int64_t now);

  const Clock& clock_;
  int64_t ttlMs_;
  size_t maxEntries_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> entries_;
};

}  // namespace kiln::web
