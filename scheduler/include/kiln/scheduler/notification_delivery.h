#pragma once
/// At-least-once delivery of the notification outbox (notification_store.h,
/// docs/operations.md "Notifications"): a thread of its own, with its own
/// database connection, sends each pending notification to its notifier,
/// in id order per (notifier, ordering key), retries failures with
/// exponential backoff (kept in the database, so a restart resumes where
/// the last run stopped) and marks what was delivered. Time comes from an
/// injected Clock; `deliverDue` is one round, callable without the thread.

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "kiln/common/clock.h"
#include "kiln/common/sync.h"
#include "kiln/scheduler/notification_store.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// One destination of notifications: a notifier plugin (webhook, command)
/// or a test's fake. Called from the delivery thread only, one call at a
/// time; it may block (bounded by its own timeout).
class Notifier {
 public:
  virtual ~Notifier() = default;
  /// Delivers one event's JSON `body` (event kind `event`). Returns
  /// nullopt on success or the reason it failed (retried later). An
  /// exception counts as a failure with its message.
  virtual std::optional<std::string> deliver(const std::string& event,
                                             const std::string& body) = 0;
};

/// Retry policy and pacing of the delivery thread.
struct DeliveryOptions {
  /// Wait after the first failure; doubled per further failure, up to max.
  std::chrono::milliseconds initialBackoff{1000};
  std::chrono::milliseconds maxBackoff{std::chrono::minutes(5)};
  /// Rows read per round.
  int64_t batch = 500;
  /// The thread's longest sleep between rounds (real time): rows queued
  /// without a wake() are seen within it.
  std::chrono::milliseconds idlePoll{250};
  /// Where the metric families are registered (null: a registry of its
  /// own); see registry().
  std::shared_ptr<prometheus::Registry> registry;
};

/// Delivers the outbox of one scheduler database to its notifiers (by
/// target name). Rows for a target that is not configured stay pending.
class NotificationDelivery {
 public:
  /// Opens `database` (migrated by the scheduler already: SchemaError
  /// otherwise; SqlError if it is missing or unreachable). Borrows `clock`, which must outlive this object.
  NotificationDelivery(
      const DatabaseSpec& database,
      std::map<std::string, std::shared_ptr<Notifier>> notifiers,
      const Clock& clock, DeliveryOptions options = {});
  /// Stops the thread (after the delivery in progress, if any).
  ~NotificationDelivery();
  NotificationDelivery(const NotificationDelivery&) = delete;
  NotificationDelivery& operator=(const NotificationDelivery&) = delete;

  /// Starts the delivery thread (once); it runs rounds until destruction.
  void start();
  /// Asks the thread for a round now (new rows were queued). Thread-safe.
  void wake();
  /// One round on the calling thread: delivers every due row whose earlier
  /// rows of the same (target, key) are delivered; a failure delays that
  /// row by the backoff and ends the round for its target. Returns how
  /// many were delivered. Not to be called while the thread runs.
  size_t deliverDue();
  /// The wait after `attempts` failed attempts.
  std::chrono::milliseconds backoff(int64_t attempts) const;
  /// Metric families (kiln_notifications_pending, ..._delivered_total,
  /// kiln_notification_failures_total,
  /// kiln_notifications_oldest_pending_seconds), for the service's /metrics.
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

 private:
  struct Wake {
    bool stop = false;
    bool wanted = false;
  };
  /// Attempts `row`; true if delivered.
  bool attempt(const NotificationRow& row, Notifier& notifier);
  void updateGauges();
  void run() noexcept;

  StateDb db_;
  NotificationStore store_;
  std::map<std::string, std::shared_ptr<Notifier>> notifiers_;
  const Clock& clock_;
  DeliveryOptions options_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>& pending_;
  prometheus::Family<prometheus::Gauge>& oldest_;
  prometheus::Family<prometheus::Counter>& delivered_;
  prometheus::Family<prometheus::Counter>& failures_;
  Sync<Wake> wake_;
  std::thread thread_;
};

}  // namespace kiln::scheduler
