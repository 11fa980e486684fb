// How long build logs stay in the database (log_store.h: endedLogPieces,
// pruneStepLogs): pieces of attempts that ended, finished logs past their
// age. Both backends: SQLite holds these tables too (a farm copied from
// PostgreSQL), with the same SQL.
#include <algorithm>
#include <limits>
#include <utility>

#include "kiln/scheduler/log_store.h"

namespace kiln::scheduler {
namespace {

int64_t boundedLimit(size_t limit) {
  constexpr auto kMax =
      static_cast<size_t>(std::numeric_limits<int64_t>::max());
  return static_cast<int64_t>(std::min(limit, kMax));
}

// The step_logs rows of steps finished before `beforeMs`, up to `limit`.
std::vector<std::pair<int64_t, int64_t>> oldStoredLogs(StateDb& db,
                                                       int64_t beforeMs,
                                                       size_t limit) {
  auto s = db.db().prepare(
      "SELECT l.step, l.attempt FROM step_logs l JOIN steps s ON s.id = "
      "l.step WHERE s.finished = 1 AND s.stop_time < ? ORDER BY l.step, "
      "l.attempt LIMIT ?");
  s.bind(beforeMs).bind(boundedLimit(limit));
  std::vector<std::pair<int64_t, int64_t>> out;
  while (s.step()) out.emplace_back(s.getInt(0), s.getInt(1));
  return out;
}

}  // namespace

std::vector<EndedLogPieces> endedLogPieces(StateDb& db, int64_t endedBeforeMs,
                                           size_t limit) {
  // A step's start_time is its last attempt's start: an earlier attempt
  // ended before it.
  auto s = db.db().prepare(
      "SELECT DISTINCT c.step, c.attempt, s.drv_path, CASE WHEN EXISTS "
      "(SELECT 1 FROM step_logs l WHERE l.step = c.step AND l.attempt = "
      "c.attempt) THEN 1 ELSE 0 END AS stored FROM step_log_chunks c JOIN "
      "steps s ON s.id = c.step WHERE (s.finished = 1 AND s.stop_time < ?) "
      "OR (c.attempt < s.attempts AND s.start_time < ?) OR EXISTS (SELECT 1 "
      "FROM step_logs l WHERE l.step = c.step AND l.attempt = c.attempt) "
      "ORDER BY c.step, c.attempt LIMIT ?");
  s.bind(endedBeforeMs).bind(endedBeforeMs).bind(boundedLimit(limit));
  std::vector<EndedLogPieces> out;
  while (s.step())
    out.push_back({s.getInt(0), s.getInt(1), s.getStr(2), s.getInt(3) != 0});
  return out;
}

LogPruneCount pruneStepLogs(StateDb& db, int64_t nowMs,
                            const LogRetention& retention, size_t limit) {
  LogPruneCount n;
  int64_t piecesBefore = nowMs - retention.endedPiecesAfter.count();
  for (auto& a : endedLogPieces(db, piecesBefore, limit)) {
    if (a.stored) {
      StateDb::Transaction txn(db);
      auto s = db.db().prepare(
          "DELETE FROM step_log_chunks WHERE step = ? AND attempt = ?");
      s.bind(a.step).bind(a.attempt).exec();
      txn.commit();
    } else {
      // Nothing is lost: what the pieces hold becomes the stored log.
      storeFinishedFromChunks(db, a.step, a.attempt);
    }
    ++n.pieceAttempts;
  }
  if (retention.storedLogsAfter.count() <= 0) return n;
  int64_t logsBefore = nowMs - retention.storedLogsAfter.count();
  auto old = oldStoredLogs(db, logsBefore, limit);
  if (old.empty()) return n;
  StateDb::Transaction txn(db);
  for (auto& [step, attempt] : old) clearStepLog(db, step, attempt);
  txn.commit();
  n.storedLogs = old.size();
  return n;
}

}  // namespace kiln::scheduler
