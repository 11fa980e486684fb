// The binary cache's garbage-collection roots: pins and the latest
// evaluations' outputs (cache_roots.h).
#include "kiln/scheduler/cache_roots.h"

#include <cctype>
#include <map>
#include <string_view>
#include <utility>

#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

namespace {

constexpr size_t kMaxName = 200;
constexpr size_t kMaxPath = 4096;
constexpr int64_t kMaxPins = 100'000;

void checkPin(const std::string& name, const std::string& path) {
  if (name.empty() || name.size() > kMaxName)
    throw SchedulerStateError("a pin name is 1 to 200 bytes");
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("._+-").find(c) == std::string_view::npos)
      throw SchedulerStateError("pin name '" + name +
                                "' has a character outside [A-Za-z0-9._+-]");
  if (path.empty() || path[0] != '/' || path.size() > kMaxPath)
    throw SchedulerStateError("a pinned path is absolute, at most 4096 bytes");
}

}  // namespace

CachePinStore::CachePinStore(StateDb& db) : db_(db) {}

void CachePinStore::add(const std::string& name, const std::string& path,
                        int64_t nowMs) {
  checkPin(name, path);
  db_.db()
      .prepare(
          "INSERT INTO cache_pins (name, path, created) VALUES (?, ?, ?) "
          "ON CONFLICT (name) DO UPDATE SET path = excluded.path, "
          "created = excluded.created")
      .bind(name)
      .bind(path)
      .bind(nowMs)
      .exec();
}

bool CachePinStore::remove(const std::string& name) {
  db_.db().prepare("DELETE FROM cache_pins WHERE name = ?").bind(name).exec();
  return db_.db().changes() > 0;
}

std::vector<CachePin> CachePinStore::list() {
  auto s = db_.db().prepare(
      "SELECT name, path, created FROM cache_pins ORDER BY name LIMIT ?");
  s.bind(kMaxPins);
  std::vector<CachePin> out;
  while (s.step()) out.push_back({s.getStr(0), s.getStr(1), s.getInt(2)});
  return out;
}

std::set<int64_t> latestEvaluations(StateDb& db, int64_t keep) {
  if (keep < 1) throw SchedulerStateError("keep at least one evaluation");
  auto& c = db.db();
  std::vector<int64_t> jobsets;
  for (auto s = c.prepare("SELECT id FROM jobsets ORDER BY id"); s.step();)
    jobsets.push_back(s.getInt(0));
  std::set<int64_t> evals;
  for (int64_t jobset : jobsets) {
    auto s = c.prepare(
        "SELECT e.id, (SELECT COUNT(*) FROM builds b WHERE b.eval = e.id "
        "AND b.finished = 0) FROM evaluations e WHERE e.jobset = ? "
        "ORDER BY e.id DESC");
    s.bind(jobset);
    int64_t finished = 0;
    while (finished < keep && s.step()) {
      evals.insert(s.getInt(0));
      if (s.getInt(1) == 0) ++finished;
    }
  }
  return evals;
}

std::set<std::string> latestEvaluationOutputs(StateDb& db, int64_t keep) {
  std::set<std::string> out;
  auto q = db.db().prepare(
      "SELECT o.path FROM build_outputs o JOIN builds b ON o.build = b.id "
      "WHERE b.eval = ?");
  for (int64_t eval : latestEvaluations(db, keep)) {
    q.bind(eval);
    while (q.step()) out.insert(q.getStr(0));
    q.reset();
  }
  return out;
}

std::map<int64_t, std::string> referencedEvalSources(StateDb& db,
                                                     int64_t keep) {
  auto evals = latestEvaluations(db, keep);
  for (auto s = db.db().prepare(
           "SELECT eval FROM channel_advances WHERE id IN (SELECT MAX(id) "
           "FROM channel_advances GROUP BY jobset)");
       s.step();)
    evals.insert(s.getInt(0));
  std::map<int64_t, std::string> out;
  auto q = db.db().prepare("SELECT path FROM eval_sources WHERE eval = ?");
  for (int64_t eval : evals) {
    q.bind(eval);
    if (q.step()) out.emplace(eval, q.getStr(0));
    q.reset();
  }
  return out;
}

}  // namespace kiln::scheduler
