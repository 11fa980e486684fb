// The notification delivery thread (notification_delivery.h).
#include "kiln/scheduler/notification_delivery.h"

#include <set>
#include <utility>

#include "kiln/common/logging.h"

namespace kiln::scheduler {
NotificationDelivery::NotificationDelivery(
    const DatabaseSpec& database,
    std::map<std::string, std::shared_ptr<Notifier>> notifiers,
    const Clock& clock, DeliveryOptions options)
    : db_(database, StateDb::Existing{}),
      store_(db_),
      notifiers_(std::move(notifiers)),
      clock_(clock),
      options_(options),
      registry_(options_.registry ? options_.registry
                                  : std::make_shared<prometheus::Registry>()),
      pending_(prometheus::BuildGauge()
                   .Name("kiln_notifications_pending")
                   .Help("Notifications not yet delivered, per notifier")
                   .Register(*registry_)),
      oldest_(prometheus::BuildGauge()
                  .Name("kiln_notifications_oldest_pending_seconds")
                  .Help("Age of the oldest undelivered notification")
                  .Register(*registry_)),
      delivered_(prometheus::BuildCounter()
                     .Name("kiln_notifications_delivered_total")
                     .Help("Notifications delivered, per notifier")
                     .Register(*registry_)),
      failures_(prometheus::BuildCounter()
                    .Name("kiln_notification_failures_total")
                    .Help("Failed delivery attempts (each is retried)")
                    .Register(*registry_)) {
  for (auto& [name, n] : notifiers_) {
    pending_.Add({{"notifier", name}});
    oldest_.Add({{"notifier", name}});
    delivered_.Add({{"notifier", name}});
    failures_.Add({{"notifier", name}});
  }
  updateGauges();
}

NotificationDelivery::~NotificationDelivery() {
  if (!thread_.joinable()) return;
  wake_.lock()->stop = true;
  wake_.notifyAll();
  thread_.join();
}

void NotificationDelivery::start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
}

void NotificationDelivery::wake() {
  wake_.lock()->wanted = true;
  wake_.notifyAll();
}

std::chrono::milliseconds NotificationDelivery::backoff(
    int64_t attempts) const {
  auto d = options_.initialBackoff;
  for (int64_t i = 1; i < attempts && d < options_.maxBackoff; i++) d *= 2;
  return std::min(d, options_.maxBackoff);
}

bool NotificationDelivery::attempt(const NotificationRow& row,
                                   Notifier& notifier) {
  std::optional<std::string> error;
  try {
    error = notifier.deliver(row.event, row.payload);
  } catch (const std::exception& e) {
    error = std::string("notifier threw: ") + e.what();
  }
  int64_t now = clock_.nowMs();
  if (!error) {
    store_.markDelivered(row.id, now);
    delivered_.Add({{"notifier", row.target}}).Increment();
    return true;
  }
  int64_t attempts = row.attempts + 1;
  store_.markFailed(row.id, attempts, now + backoff(attempts).count(), *error);
  failures_.Add({{"notifier", row.target}}).Increment();
  logWarn("notification " + std::to_string(row.id) + " (" + row.event +
          ") to " + row.target + " failed (attempt " +
          std::to_string(attempts) + "): " + *error);
  return false;
}

size_t NotificationDelivery::deliverDue() {
  size_t delivered = 0;
  std::set<std::string> blockedTargets;
  std::set<std::pair<std::string, std::string>> blockedKeys;
  for (auto& row : store_.pending(options_.batch)) {
    auto key = std::pair(row.target, row.orderingKey);
    if (blockedTargets.count(row.target) || blockedKeys.count(key)) continue;
    auto n = notifiers_.find(row.target);
    if (n == notifiers_.end()) {
      blockedTargets.insert(row.target);  // kept for when it is configured
      continue;
    }
    if (row.nextAttemptMs > clock_.nowMs()) {
      blockedKeys.insert(key);  // later rows of the key wait for this one
      continue;
    }
    if (attempt(row, *n->second)) {
      delivered++;
    } else {
      blockedTargets.insert(row.target);  // likely down: next round
    }
  }
  updateGauges();
  return delivered;
}

void NotificationDelivery::updateGauges() {
  std::map<std::string, PendingSummary> byTarget;
  for (auto& s : store_.pendingSummary()) byTarget[s.target] = s;
  int64_t now = clock_.nowMs();
  for (auto& [name, n] : notifiers_) {
    auto it = byTarget.find(name);
    bool any = it != byTarget.end();
    pending_.Add({{"notifier", name}}).Set(any ? double(it->second.count) : 0);
    oldest_.Add({{"notifier", name}})
        .Set(any ? double(now - it->second.oldestMs) / 1000 : 0);
  }
}

void NotificationDelivery::run() noexcept {
  for (;;) {
    {
      auto w = wake_.lock();
      w.waitUntil(clock_, clock_.now() + options_.idlePoll,
                  [&] { return w->stop || w->wanted; });
      if (w->stop) return;
      w->wanted = false;
    }
    try {
      // Rounds until nothing more is due now (a batch may not hold all).
      while (deliverDue() > 0 && !wake_.lock()->stop) {
      }
    } catch (const std::exception& e) {
      logError(std::string("notification delivery: ") + e.what());
    }
  }
}

}  // namespace kiln::scheduler
