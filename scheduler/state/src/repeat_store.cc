// Reproducibility checks' rows (repeat_store.h).
#include "kiln/scheduler/repeat_store.h"

#include <algorithm>

#include "state_rows.h"

namespace kiln::scheduler {

namespace {

const char* const kCheckColumns =
    "r.step, r.jobset, r.state, r.first_worker, r.second_worker, "
    "r.differing, r.side_location, r.report, r.created, r.finished, "
    "s.drv_path, r.refused_by";

// Worker names (which may hold spaces) one a line.
std::vector<std::string> splitLines(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t j = std::min(s.find('\n', i), s.size());
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

RepeatCheck readCheck(const SqlStmt& s) {
  RepeatCheck c;
  c.step = s.getInt(0);
  c.jobset = s.getInt(1);
  c.state = s.getStr(2);
  c.firstWorker = s.getStr(3);
  c.secondWorker = s.getStr(4);
  c.differing = detail::splitWords(s.getStr(5));
  c.sideLocation = s.getStr(6);
  c.report = s.getStr(7);
  c.createdMs = s.getInt(8);
  c.finishedMs = s.getInt(9);
  c.drvPath = s.getStr(10);
  c.refusedBy = splitLines(s.getStr(11));
  return c;
}

std::string selectChecks(const std::string& rest) {
  return std::string("SELECT ") + kCheckColumns +
         " FROM repeat_checks r JOIN steps s ON s.id = r.step " + rest;
}

}  // namespace

bool addRepeatCheck(StateDb& db, int64_t step, int64_t jobset,
                    const std::string& firstWorker, int64_t nowMs) {
  auto s = db.db().prepare(
      "INSERT INTO repeat_checks (step, jobset, state, first_worker, created) "
      "VALUES (?, ?, 'pending', ?, ?) ON CONFLICT DO NOTHING");
  s.bind(step).bind(jobset).bind(firstWorker).bind(nowMs).exec();
  return db.db().changes() > 0;
}

std::optional<RepeatCheck> repeatCheck(StateDb& db, int64_t step) {
  auto s = db.db().prepare(selectChecks("WHERE r.step = ?"));
  s.bind(step);
  if (!s.step()) return std::nullopt;
  return readCheck(s);
}

std::vector<RepeatCheck> pendingRepeatChecks(StateDb& db, int64_t limit) {
  auto s = db.db().prepare(selectChecks(
      "WHERE r.state = 'pending' ORDER BY r.created, r.step LIMIT ?"));
  s.bind(std::clamp<int64_t>(limit, 0, kMaxListedRepeats));
  return detail::readAll<RepeatCheck>(s, readCheck);
}

std::vector<RepeatCheck> runningRepeatChecks(StateDb& db, int64_t limit) {
  auto s = db.db().prepare(selectChecks(
      "WHERE r.state = 'running' ORDER BY r.created, r.step LIMIT ?"));
  s.bind(std::clamp<int64_t>(limit, 0, kMaxListedRepeats));
  return detail::readAll<RepeatCheck>(s, readCheck);
}

size_t requeueRunningRepeatChecks(StateDb& db) {
  db.db()
      .prepare(
          "UPDATE repeat_checks SET state = 'pending', second_worker = '' "
          "WHERE state = 'running'")
      .exec();
  return static_cast<size_t>(db.db().changes());
}

void waitRepeatCheckAgain(StateDb& db, int64_t step) {
  db.db()
      .prepare(
          "UPDATE repeat_checks SET state = 'pending', second_worker = '' "
          "WHERE step = ? AND state = 'running'")
      .bind(step)
      .exec();
}

void setRepeatCheckRefusedBy(StateDb& db, int64_t step,
                             const std::vector<std::string>& refusedBy) {
  if (refusedBy.size() > kMaxRefusers)
    throw SchedulerStateError("too many workers refused the check");
  std::string text;
  for (auto& w : refusedBy) {
    if (w.empty() || w.size() > 1000 || w.find('\n') != std::string::npos)
      throw SchedulerStateError(
          "a refusing worker's name is 1 to 1000 "
          "bytes without a line break");
    text += w + "\n";
  }
  db.db()
      .prepare("UPDATE repeat_checks SET refused_by = ? WHERE step = ?")
      .bind(text)
      .bind(step)
      .exec();
}

void startRepeatCheck(StateDb& db, int64_t step,
                      const std::string& secondWorker) {
  db.db()
      .prepare(
          "UPDATE repeat_checks SET state = 'running', second_worker = ? "
          "WHERE step = ?")
      .bind(secondWorker)
      .bind(step)
      .exec();
}

void finishRepeatCheck(StateDb& db, int64_t step, bool ok,
                       const RepeatVerdict& verdict,
                       const std::string& sideLocation, int64_t nowMs) {
  std::string differing = detail::joinWords(verdict.differing);
  const char* state = !ok                     ? "failed"
                      : verdict.deterministic ? "same"
                                              : "differs";
  db.db()
      .prepare(
          "UPDATE repeat_checks SET state = ?, differing = ?, "
          "side_location = ?, finished = ? WHERE step = ?")
      .bind(std::string(state))
      .bind(ok ? differing : std::string())
      .bind(sideLocation)
      .bind(nowMs)
      .bind(step)
      .exec();
}

std::vector<RepeatCheck> repeatNarsToPrune(StateDb& db, int64_t nowMs,
                                           int64_t keepDiffersMs,
                                           int64_t limit) {
  auto s = db.db().prepare(
      selectChecks("WHERE r.side_location <> '' AND (r.state = 'same' OR "
                   "(r.state IN ('differs', 'failed') AND r.report <> '' AND "
                   "r.finished < ?)) "
                   "ORDER BY r.finished, r.step LIMIT ?"));
  s.bind(nowMs - std::max<int64_t>(keepDiffersMs, 0));
  s.bind(std::clamp<int64_t>(limit, 0, kMaxListedRepeats));
  return detail::readAll<RepeatCheck>(s, readCheck);
}

void forgetRepeatNars(StateDb& db, int64_t step) {
  db.db()
      .prepare("UPDATE repeat_checks SET side_location = '' WHERE step = ?")
      .bind(step)
      .exec();
}

void setRepeatReport(StateDb& db, int64_t step, const std::string& report) {
  db.db()
      .prepare("UPDATE repeat_checks SET report = ? WHERE step = ?")
      .bind(report.substr(0, kMaxRepeatReport))
      .bind(step)
      .exec();
}

std::vector<NonDeterministicJob> nonDeterministicJobs(StateDb& db,
                                                      int64_t jobset) {
  auto s = db.db().prepare(
      selectChecks("WHERE r.jobset = ? AND r.state = 'differs' "
                   "ORDER BY r.finished DESC, r.step DESC LIMIT ?"));
  s.bind(jobset).bind(kMaxListedRepeats);
  std::vector<NonDeterministicJob> out;
  for (auto& c : detail::readAll<RepeatCheck>(s, readCheck)) {
    NonDeterministicJob j{c, "", 0};
    auto b = db.db().prepare(
        "SELECT job, id FROM builds WHERE jobset = ? AND drv_path = ? "
        "ORDER BY id DESC LIMIT 1");
    b.bind(jobset).bind(c.drvPath);
    if (b.step()) {
      j.job = b.getStr(0);
      j.build = b.getInt(1);
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace kiln::scheduler
