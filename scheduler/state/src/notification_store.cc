// The notification outbox table (notification_store.h).
#include "kiln/scheduler/notification_store.h"

#include "kiln/scheduler/state_db.h"
#include "state_rows.h"

namespace kiln::scheduler {
namespace {

constexpr const char* kCols =
    "id, target, ordering_key, event, payload, created, attempts, "
    "next_attempt, last_error, delivered";
constexpr size_t kMaxError = 1000;

NotificationRow readRow(const SqlStmt& s) {
  NotificationRow r;
  r.id = s.getInt(0);
  r.target = s.getStr(1);
  r.orderingKey = s.getStr(2);
  r.event = s.getStr(3);
  r.payload = s.getStr(4);
  r.createdMs = s.getInt(5);
  r.attempts = s.getInt(6);
  r.nextAttemptMs = s.getInt(7);
  r.lastError = s.getStr(8);
  r.deliveredMs = s.getInt(9);
  return r;
}

}  // namespace

NotificationStore::NotificationStore(StateDb& db) : db_(db.db()) {}

int64_t NotificationStore::add(const std::string& target,
                               const std::string& orderingKey,
                               const std::string& event,
                               const std::string& payload, int64_t createdMs) {
  return detail::insertedId(
      db_.prepare(
             "INSERT INTO notifications (target, ordering_key, event, payload, "
             "created) VALUES (?, ?, ?, ?, ?) RETURNING id")
          .bind(target)
          .bind(orderingKey)
          .bind(event)
          .bind(payload)
          .bind(createdMs));
}

std::vector<NotificationRow> NotificationStore::pending(int64_t limit) {
  auto s = db_.prepare(std::string("SELECT ") + kCols +
                       " FROM notifications WHERE delivered = 0 ORDER BY id "
                       "LIMIT ?");
  s.bind(limit);
  std::vector<NotificationRow> out;
  while (s.step()) out.push_back(readRow(s));
  return out;
}

void NotificationStore::markDelivered(int64_t id, int64_t timeMs) {
  db_.prepare("UPDATE notifications SET delivered = ? WHERE id = ?")
      .bind(timeMs > 0 ? timeMs : int64_t{1})
      .bind(id)
      .exec();
}

void NotificationStore::markFailed(int64_t id, int64_t attempts,
                                   int64_t nextAttemptMs,
                                   const std::string& error) {
  db_.prepare(
         "UPDATE notifications SET attempts = ?, next_attempt = ?, "
         "last_error = ? WHERE id = ?")
      .bind(attempts)
      .bind(nextAttemptMs)
      .bind(error.substr(0, kMaxError))
      .bind(id)
      .exec();
}

std::optional<NotificationRow> NotificationStore::row(int64_t id) {
  auto s = db_.prepare(std::string("SELECT ") + kCols +
                       " FROM notifications WHERE id = ?");
  s.bind(id);
  if (!s.step()) return std::nullopt;
  return readRow(s);
}

std::vector<PendingSummary> NotificationStore::pendingSummary() {
  auto s = db_.prepare(
      "SELECT target, count(*), min(created) FROM notifications WHERE "
      "delivered = 0 GROUP BY target ORDER BY target");
  std::vector<PendingSummary> out;
  while (s.step()) out.push_back({s.getStr(0), s.getInt(1), s.getInt(2)});
  return out;
}

std::string NotificationStore::projectName(int64_t id) {
  auto s = db_.prepare("SELECT name FROM projects WHERE id = ?");
  s.bind(id);
  return s.step() ? s.getStr(0) : std::string();
}

}  // namespace kiln::scheduler
