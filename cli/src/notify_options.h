#pragma once
// `kiln scheduler --notify KIND:ARG`: notifier plugins behind the
// scheduler's notification outbox (docs/operations.md, "Notifications").

#include <prometheus/registry.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/scheduler/notification_delivery.h"
#include "kiln/scheduler/notification_outbox.h"

namespace kiln::cli {

/// One `--notify KIND:ARG` option, parsed.
struct NotifySpec {
  std::string kind;      ///< the notifier plugin's name ("webhook")
  std::string argument;  ///< its URL or command
};

/// Parses and checks `--notify` specs and `--notify-secret-file` without
/// loading a plugin (so `kiln serve` can refuse them before starting a
/// scheduler): each spec is KIND:ARG with a non-empty kind of letters,
/// digits, '-' or '_' and an argument of at most 4096 bytes; a webhook's
/// URL starts with http:// or https://; a secret file needs a webhook, a
/// CA file (`--notify-ca-file`: the only CAs an https webhook's server
/// certificate is checked against; default the system's) an https one,
/// and each must be a readable regular file. Throws Error naming the
/// option and the reason.
std::vector<NotifySpec> parseNotifyOptions(
    const std::vector<std::string>& specs, const std::string& secretFile,
    const std::string& caFile = "");

/// The notifiers of a scheduler, before and after its service starts.
class SchedulerNotifiers {
 public:
  /// Loads the notifier plugin of each `KIND:ARG` spec (e.g.
  /// "command:./hook.sh", "webhook:http://host/path") and creates an
  /// instance configured with ARG (and, for webhooks, `secretFile` and,
  /// for https ones, `caFile` if not empty). Throws Error naming the spec
  /// and the reason (unknown kind, missing argument, a plugin without a
  /// deliver function, the plugin's refusal, a secret file but no webhook,
  /// a CA file but no https webhook, an unreadable CA file).
  SchedulerNotifiers(const std::vector<std::string>& specs,
                     const std::string& secretFile,
                     const std::string& caFile = "");
  /// Stops the delivery (the service, which calls the outbox, must be
  /// gone or stopped first).
  ~SchedulerNotifiers();
  SchedulerNotifiers(const SchedulerNotifiers&) = delete;
  SchedulerNotifiers& operator=(const SchedulerNotifiers&) = delete;

  /// The sink for ServiceConfig::eventSinks (null when no spec was given).
  std::shared_ptr<scheduler::NotificationOutbox> outbox() const {
    return outbox_;
  }
  /// The delivery metrics, for the web's /metrics (WebContext::extraMetrics).
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  /// Starts delivering from `database` (after the service migrated it).
  void start(const scheduler::DatabaseSpec& database, const Clock& clock);

 private:
  std::map<std::string, std::shared_ptr<scheduler::Notifier>> notifiers_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<scheduler::NotificationOutbox> outbox_;
  /// Set once delivery runs; the outbox's callback wakes it.
  std::shared_ptr<std::atomic<scheduler::NotificationDelivery*>> wake_;
  std::unique_ptr<scheduler::NotificationDelivery> delivery_;
};

}  // namespace kiln::cli
