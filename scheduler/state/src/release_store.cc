// Release engineering's rows: aggregate constituents and channels
// (release_store.h).
#include "kiln/scheduler/release_store.h"

#include <algorithm>

#include "kiln/scheduler/state_queries.h"
#include "state_rows.h"

namespace kiln::scheduler {

using detail::buildColumnsOf;
using detail::readBuild;

namespace {

// Pairs per INSERT (two parameters each).
constexpr size_t kPairsPerStatement = 256;

}  // namespace

void addAggregateConstituents(
    StateDb& db, const std::vector<std::pair<int64_t, int64_t>>& edges) {
  for (size_t at = 0; at < edges.size(); at += kPairsPerStatement) {
    size_t end = std::min(edges.size(), at + kPairsPerStatement);
    std::string sql =
        "INSERT INTO aggregate_constituents (aggregate, constituent) VALUES ";
    for (size_t i = at; i < end; ++i) sql += i == at ? "(?, ?)" : ", (?, ?)";
    sql += " ON CONFLICT DO NOTHING";
    auto s = db.db().prepare(sql);
    for (size_t i = at; i < end; ++i)
      s.bind(edges[i].first).bind(edges[i].second);
    s.exec();
  }
}

std::vector<BuildRow> aggregateConstituents(StateDb& db, int64_t aggregate) {
  auto s = db.db().prepare(
      "SELECT " + buildColumnsOf("b") +
      " FROM aggregate_constituents a JOIN builds b ON b.id = a.constituent "
      "WHERE a.aggregate = ? ORDER BY b.job, b.id LIMIT ?");
  s.bind(aggregate).bind(kMaxListedConstituents);
  return detail::readAll<BuildRow>(s, readBuild);
}

bool isAggregate(StateDb& db, int64_t build) {
  auto s = db.db().prepare(
      "SELECT 1 FROM aggregate_constituents WHERE aggregate = ? LIMIT 1");
  s.bind(build);
  return s.step();
}

namespace {

const char* const kAdvanceColumns = "id, jobset, eval, build, time";

ChannelAdvance readAdvance(const SqlStmt& s) {
  return {s.getInt(0), s.getInt(1), s.getInt(2), s.getInt(3), s.getInt(4)};
}

}  // namespace

std::optional<ChannelCandidate> channelCandidate(StateDb& db, int64_t build) {
  auto s = db.db().prepare(
      "SELECT b.jobset, b.eval FROM builds b JOIN jobsets j ON j.id = "
      "b.jobset WHERE b.id = ? AND b.finished = 1 AND b.status = 0 AND "
      "b.job = j.channel_job");
  s.bind(build);
  if (!s.step()) return std::nullopt;
  ChannelCandidate c{s.getInt(0), s.getInt(1), build,
                     latestChannelAdvance(db, s.getInt(0))};
  if (c.current && c.current->eval >= c.eval) return std::nullopt;
  return c;
}

ChannelAdvance recordChannelAdvance(StateDb& db, const ChannelCandidate& c,
                                    int64_t nowMs) {
  ChannelAdvance a{0, c.jobset, c.eval, c.build, nowMs};
  auto ins = db.db().prepare(
      "INSERT INTO channel_advances (jobset, eval, build, time) VALUES "
      "(?, ?, ?, ?) RETURNING id");
  ins.bind(a.jobset).bind(a.eval).bind(a.build).bind(a.timeMs);
  a.id = detail::insertedId(ins);
  return a;
}

std::optional<ChannelAdvance> advanceChannel(StateDb& db, int64_t build,
                                             int64_t nowMs) {
  auto c = channelCandidate(db, build);
  if (!c) return std::nullopt;
  return recordChannelAdvance(db, *c, nowMs);
}

std::optional<ChannelAdvance> latestChannelAdvance(StateDb& db,
                                                   int64_t jobset) {
  auto all = channelAdvances(db, jobset, 1);
  if (all.empty()) return std::nullopt;
  return all.front();
}

std::vector<ChannelAdvance> channelAdvances(StateDb& db, int64_t jobset,
                                            int64_t limit) {
  if (limit < 1 || limit > Page::kMaxLimit)
    throw SchedulerStateError("at most " + std::to_string(Page::kMaxLimit) +
                              " channel advances at a time");
  auto s = db.db().prepare(std::string("SELECT ") + kAdvanceColumns +
                           " FROM channel_advances WHERE jobset = ? ORDER BY "
                           "id DESC LIMIT ?");
  s.bind(jobset).bind(limit);
  return detail::readAll<ChannelAdvance>(s, readAdvance);
}

void setEvalSources(StateDb& db, int64_t eval, const std::string& path) {
  if (path.empty() || path.size() > 4096 || path[0] != '/')
    throw SchedulerStateError("sources must be an absolute store path");
  db.db()
      .prepare("INSERT INTO eval_sources (eval, path) VALUES (?, ?)")
      .bind(eval)
      .bind(path)
      .exec();
}

std::string evalSources(StateDb& db, int64_t eval) {
  auto s = db.db().prepare("SELECT path FROM eval_sources WHERE eval = ?");
  s.bind(eval);
  return s.step() ? s.getStr(0) : "";
}

std::vector<std::string> succeededOutputs(StateDb& db, int64_t eval) {
  auto s = db.db().prepare(
      "SELECT DISTINCT o.path FROM build_outputs o JOIN builds b ON b.id = "
      "o.build WHERE b.eval = ? AND b.finished = 1 AND b.status = 0 ORDER BY "
      "o.path LIMIT ?");
  s.bind(eval).bind(kMaxChannelPaths);
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.getStr(0));
  return out;
}

}  // namespace kiln::scheduler
