// Claims and results of remote evaluations (eval_queue.h).
#include "kiln/scheduler/eval_queue.h"

#include <algorithm>
#include <cstring>

#include "kiln/common/encoding.h"
#include "kiln/common/error.h"

namespace kiln::scheduler {

namespace {

std::optional<int64_t> optInt(const SqlStmt& s, int col) {
  if (s.isNull(col)) return std::nullopt;
  return s.getInt(col);
}

SqlStmt& bindOpt(SqlStmt& s, const std::optional<int64_t>& v) {
  return v ? s.bind(*v) : s.bindNull();
}

}  // namespace

bool claimEvaluation(StateDb& db, const EvalClaim& claim, int64_t nowMs) {
  StateDb::Transaction txn(db);
  db.db()
      .prepare("DELETE FROM eval_claims WHERE jobset = ? AND lease_until < ?")
      .bind(claim.jobset)
      .bind(nowMs)
      .exec();
  auto ins = db.db().prepare(
      "INSERT INTO eval_claims (jobset, evaluator, request, force, claimed, "
      "lease_until) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (jobset) DO "
      "NOTHING RETURNING jobset");
  ins.bind(claim.jobset).bind(claim.evaluator);
  bindOpt(ins, claim.request)
      .bind(int64_t{claim.force})
      .bind(claim.claimedMs)
      .bind(claim.leaseUntilMs);
  bool won = ins.step();
  ins.reset();
  txn.commit();
  return won;
}

bool renewEvalClaim(StateDb& db, int64_t jobset, const std::string& evaluator,
                    int64_t leaseUntilMs) {
  auto s = db.db().prepare(
      "UPDATE eval_claims SET lease_until = ? WHERE jobset = ? AND "
      "evaluator = ? RETURNING jobset");
  s.bind(leaseUntilMs).bind(jobset).bind(evaluator);
  bool mine = s.step();
  s.reset();
  return mine;
}

void releaseEvalClaim(StateDb& db, int64_t jobset,
                      const std::string& evaluator) {
  db.db()
      .prepare("DELETE FROM eval_claims WHERE jobset = ? AND evaluator = ?")
      .bind(jobset)
      .bind(evaluator)
      .exec();
}

std::vector<EvalClaim> evalClaims(StateDb& db) {
  auto s = db.db().prepare(
      "SELECT jobset, evaluator, request, force, claimed, lease_until FROM "
      "eval_claims ORDER BY jobset");
  std::vector<EvalClaim> out;
  while (s.step())
    out.push_back({s.getInt(0), s.getStr(1), optInt(s, 2), s.getInt(3) != 0,
                   s.getInt(4), s.getInt(5)});
  return out;
}

std::vector<EvalResultRow> evalResults(StateDb& db) {
  auto s = db.db().prepare(
      "SELECT id, jobset, request, evaluator, created, chunks, bytes FROM "
      "eval_results ORDER BY id");
  std::vector<EvalResultRow> out;
  while (s.step())
    out.push_back({s.getInt(0), s.getInt(1), optInt(s, 2), s.getStr(3),
                   s.getInt(4), s.getInt(5), s.getInt(6)});
  return out;
}

void deleteEvalResult(StateDb& db, int64_t id) {
  StateDb::Transaction txn(db);
  db.db()
      .prepare("DELETE FROM eval_result_chunks WHERE result = ?")
      .bind(id)
      .exec();
  db.db().prepare("DELETE FROM eval_results WHERE id = ?").bind(id).exec();
  txn.commit();
}

EvalResultWriter::EvalResultWriter(StateDb& db, const EvalResultRow& row)
    : db_(db) {
  auto s = db_.db().prepare(
      "INSERT INTO eval_results (jobset, request, evaluator, created) VALUES "
      "(?, ?, ?, ?) RETURNING id");
  s.bind(row.jobset);
  bindOpt(s, row.request).bind(row.evaluator).bind(row.createdMs);
  if (!s.step()) throw Error("storing an evaluation result returned no id");
  id_ = s.getInt(0);
  s.reset();
}

void EvalResultWriter::write(std::string_view data) {
  while (!data.empty()) {
    size_t n = std::min(data.size(), kEvalChunkBytes - buffer_.size());
    buffer_.append(data.substr(0, n));
    data.remove_prefix(n);
    bytes_ += static_cast<int64_t>(n);
    if (buffer_.size() == kEvalChunkBytes) flush();
  }
}

void EvalResultWriter::flush() {
  if (buffer_.empty()) return;
  if (chunks_ >= kMaxEvalChunks)
    throw Error("an evaluation result is larger than " +
                std::to_string(kMaxEvalChunks * (kEvalChunkBytes >> 20)) +
                " MiB compressed");
  db_.db()
      .prepare(
          "INSERT INTO eval_result_chunks (result, seq, data) VALUES (?, ?, "
          "?)")
      .bind(id_)
      .bind(chunks_)
      .bind(base64Encode(buffer_))
      .exec();
  chunks_++;
  buffer_.clear();
}

int64_t EvalResultWriter::finish() {
  flush();
  db_.db()
      .prepare("UPDATE eval_results SET chunks = ?, bytes = ? WHERE id = ?")
      .bind(chunks_)
      .bind(bytes_)
      .bind(id_)
      .exec();
  // Wakes the scheduler (at commit), which reads results when woken.
  db_.db().notify(kRequestsChannel);
  return id_;
}

EvalResultReader::EvalResultReader(StateDb& db, const EvalResultRow& row)
    : db_(db), row_(row) {
  if (row_.chunks < 0 || row_.chunks > kMaxEvalChunks || row_.bytes < 0)
    throw FormatError("evaluation result " + std::to_string(row_.id) +
                      ": bad chunk count or size");
}

size_t EvalResultReader::read(char* data, size_t len) {
  while (pos_ == chunk_.size()) {
    if (next_ == row_.chunks) {
      if (read_ != row_.bytes)
        throw FormatError("evaluation result " + std::to_string(row_.id) +
                          " is shorter than its recorded size");
      return 0;
    }
    auto s = db_.db().prepare(
        "SELECT data FROM eval_result_chunks WHERE result = ? AND seq = ?");
    s.bind(row_.id).bind(next_);
    if (!s.step())
      throw FormatError("evaluation result " + std::to_string(row_.id) +
                        ": chunk " + std::to_string(next_) + " is missing");
    std::string text = s.getStr(0);
    s.reset();
    if (text.size() > base64Length(kEvalChunkBytes))
      throw FormatError("evaluation result " + std::to_string(row_.id) +
                        ": chunk " + std::to_string(next_) + " is too large");
    chunk_ = base64Decode(text);
    pos_ = 0;
    next_++;
  }
  size_t n = std::min(len, chunk_.size() - pos_);
  std::memcpy(data, chunk_.data() + pos_, n);
  pos_ += n;
  read_ += static_cast<int64_t>(n);
  if (read_ > row_.bytes)
    throw FormatError("evaluation result " + std::to_string(row_.id) +
                      " is longer than its recorded size");
  return n;
}

}  // namespace kiln::scheduler
