// The shared models of the costlier pages (model_cache.h).
#include "model_cache.h"

namespace kiln::web {

ModelCache::ModelCache(const Clock& clock, std::chrono::milliseconds ttl,
                       size_t maxEntries)
    : clock_(clock), ttlMs_(ttl.count()), maxEntries_(maxEntries) {}

bool ModelCache::fresh(const Entry& e, int64_t now) const {
  int64_t made = e.madeMs.load();
  return now >= made && now - made < ttlMs_;
}

std::shared_ptr<ModelCache::Entry> ModelCache::entry(const std::string& key,
                                                     int64_t now) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end()) return it->second;
  if (entries_.size() >= maxEntries_) {
    std::erase_if(entries_, [&](auto& kv) { return !fresh(*kv.second, now); });
    if (entries_.size() >= maxEntries_) entries_.erase(entries_.begin());
  }
  auto e = std::make_shared<Entry>();
  entries_.emplace(key, e);
  return e;
}

nlohmann::json ModelCache::get(const std::string& key,
                               const std::function<nlohmann::json()>& make) {
  auto e = entry(key, clock_.nowMs());
  std::lock_guard making(e->mu);
  int64_t now = clock_.nowMs();
  if (fresh(*e, now)) return e->model;
  e->model = make();
  e->madeMs = now;
  return e->model;
}

size_t ModelCache::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace kiln::web
