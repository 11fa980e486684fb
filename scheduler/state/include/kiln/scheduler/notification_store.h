#pragma once
/// The notification outbox in the scheduler database (schema migration 3,
/// docs/operations.md "Notifications"): one row per event and notifier,
/// pending until the delivery thread marks it delivered. The service
/// thread inserts rows on its own connection, in the transaction of the
/// state change they report; the delivery thread reads and updates them on
/// a connection of its own (WAL: neither blocks the other for long).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/scheduler/sql.h"

namespace kiln::scheduler {

class StateDb;

/// One pending or delivered notification for one notifier.
struct NotificationRow {
  int64_t id = 0;           ///< delivery order (per ordering key)
  std::string target;       ///< the notifier's name, e.g. "webhook"
  std::string orderingKey;  ///< e.g. "build:12": delivered in id order
  std::string event;        ///< e.g. "build.finished"
  std::string payload;      ///< the JSON body (holds the event's unique id)
  int64_t createdMs = 0;
  int64_t attempts = 0;       ///< failed attempts so far
  int64_t nextAttemptMs = 0;  ///< not before (Unix ms; 0 = at once)
  std::string lastError;
  int64_t deliveredMs = 0;  ///< 0 while pending
};

/// Pending notifications of one target, and the oldest one's creation.
struct PendingSummary {
  std::string target;
  int64_t count = 0;
  int64_t oldestMs = 0;
};

/// Typed access to the `notifications` table of a borrowed state database
/// or connection (which must outlive this object). Not thread-safe, like
/// the connection. Every failure throws SqlError.
class NotificationStore {
 public:
  /// Works on `db`'s connection (the service thread's outbox writes, in
  /// its transactions).
  explicit NotificationStore(StateDb& db);
  /// Works on a connection of its own (the delivery thread's); the schema
  /// must be migrated, i.e. a StateDb opened the file once.
  explicit NotificationStore(SqlConnection& db) : db_(db) {}

  /// Queues `payload` (event kind `event`) for notifier `target` under
  /// `orderingKey`, pending; returns the new row's id.
  int64_t add(const std::string& target, const std::string& orderingKey,
              const std::string& event, const std::string& payload,
              int64_t createdMs);
  /// Up to `limit` pending rows, by id.
  std::vector<NotificationRow> pending(int64_t limit);
  /// Marks row `id` delivered at `timeMs`.
  void markDelivered(int64_t id, int64_t timeMs);
  /// Records a failed attempt of row `id`: its attempt count, when to try
  /// again and why it failed (kept bounded to 1000 bytes).
  void markFailed(int64_t id, int64_t attempts, int64_t nextAttemptMs,
                  const std::string& error);
  /// Row `id`, if it exists.
  std::optional<NotificationRow> row(int64_t id);
  /// Pending counts per target (targets without pending rows are absent).
  std::vector<PendingSummary> pendingSummary();
  /// The name of project `id` ("" if none): payloads name the project.
  std::string projectName(int64_t id);

 private:
  SqlConnection& db_;
};

}  // namespace kiln::scheduler
