// Build logs in the state database: the writing half (log_store.h).
#include "kiln/scheduler/log_store.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "kiln/common/file.h"
#include "kiln/scheduler/logs.h"

namespace kiln::scheduler {
namespace {

constexpr size_t kPostgresChunksPerInsert = 64;
constexpr int kLevel = 3;  // zstd's default: ~10x on build logs, fast
constexpr size_t kReadBytes = 1 << 20;

struct CCtxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};

// Compresses what `next` gives (a piece per call, "" at the end) into one
// frame with a content checksum.
template <class Next>
CompressedLog compressPieces(Next next) {
  std::unique_ptr<ZSTD_CCtx, CCtxFree> c(ZSTD_createCCtx());
  if (!c) throw Error("zstd: out of memory");
  ZSTD_CCtx_setParameter(c.get(), ZSTD_c_compressionLevel, kLevel);
  ZSTD_CCtx_setParameter(c.get(), ZSTD_c_checksumFlag, 1);
  CompressedLog out;
  std::string buf(ZSTD_CStreamOutSize(), '\0');
  for (;;) {
    std::string_view piece = next();
    out.size += static_cast<int64_t>(piece.size());
    ZSTD_EndDirective mode = piece.empty() ? ZSTD_e_end : ZSTD_e_continue;
    ZSTD_inBuffer in{piece.data(), piece.size(), 0};
    size_t left = 0;
    do {
      ZSTD_outBuffer o{buf.data(), buf.size(), 0};
      left = ZSTD_compressStream2(c.get(), &o, &in, mode);
      if (ZSTD_isError(left))
        throw Error(std::string("zstd: ") + ZSTD_getErrorName(left));
      out.body.append(buf.data(), o.pos);
    } while (mode == ZSTD_e_end ? left != 0 : in.pos < in.size);
    if (piece.empty()) return out;
  }
}

std::string chunkInsertSql(SqlDialect d, size_t rows) {
  std::string one = std::string("(?, ?, ?, ") + blobParam(d) + ")";
  std::string sql =
      "INSERT INTO step_log_chunks (step, attempt, pos, data) VALUES " + one;
  for (size_t r = 1; r < rows; ++r) sql += ", " + one;
  return sql;
}

}  // namespace

void appendLogChunks(StateDb& db, const std::vector<LogChunk>& chunks) {
  size_t per =
      db.dialect() == SqlDialect::kPostgres ? kPostgresChunksPerInsert : 1;
  for (size_t first = 0; first < chunks.size(); first += per) {
    size_t rows = std::min(per, chunks.size() - first);
    auto s = db.db().prepare(chunkInsertSql(db.dialect(), rows));
    for (size_t k = first; k < first + rows; ++k)
      s.bind(chunks[k].step)
          .bind(chunks[k].attempt)
          .bind(chunks[k].pos)
          .bindBlob(chunks[k].data);
    s.exec();
  }
}

int64_t logChunksEnd(StateDb& db, int64_t step, int64_t attempt) {
  auto s = db.db().prepare(
      "SELECT pos + length(data) FROM step_log_chunks WHERE step = ? AND "
      "attempt = ? ORDER BY pos DESC LIMIT 1");
  s.bind(step).bind(attempt);
  return s.step() ? s.getInt(0) : 0;
}

void clearStepLog(StateDb& db, int64_t step, int64_t attempt) {
  StateDb::Transaction txn(db);
  for (const char* table : {"step_log_chunks", "step_logs"}) {
    auto s = db.db().prepare(std::string("DELETE FROM ") + table +
                             " WHERE step = ? AND attempt = ?");
    s.bind(step).bind(attempt).exec();
  }
  txn.commit();
}

CompressedLog compressLog(std::string_view text) {
  bool given = false;
  return compressPieces([&]() -> std::string_view {
    if (given) return {};
    given = true;
    return text;
  });
}

CompressedLog compressLogFile(const std::string& path, uint64_t maxBytes) {
  AutoCloseFD fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return compressLog("");
    throwSysError("opening log " + path);
  }
  std::string buf(kReadBytes, '\0');
  uint64_t left = maxBytes ? maxBytes : UINT64_MAX;
  return compressPieces([&]() -> std::string_view {
    size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), left));
    ssize_t n = want ? ::read(fd.get(), buf.data(), want) : 0;
    if (n < 0) throwSysError("reading log " + path);
    left -= static_cast<uint64_t>(n);
    return std::string_view(buf.data(), static_cast<size_t>(n));
  });
}

void storeFinishedLog(StateDb& db, int64_t step, int64_t attempt,
                      const CompressedLog& log) {
  StateDb::Transaction txn(db);
  clearStepLog(db, step, attempt);
  auto s = db.db().prepare(
      std::string("INSERT INTO step_logs (step, attempt, size, body) VALUES "
                  "(?, ?, ?, ") +
      blobParam(db.dialect()) + ")");
  s.bind(step).bind(attempt).bind(log.size).bindBlob(log.body).exec();
  txn.commit();
}

void storeFinishedFromChunks(StateDb& db, int64_t step, int64_t attempt) {
  if (logChunksEnd(db, step, attempt) == 0) return;
  StepLogReader reader(
      {static_cast<int>(attempt), StepLog::Where::kLive, step, "", 0, 0});
  std::string piece;
  int64_t offset = 0;
  auto log = compressPieces([&]() -> std::string_view {
    piece = reader.read(db, offset, kReadBytes);
    offset += static_cast<int64_t>(piece.size());
    return piece;
  });
  storeFinishedLog(db, step, attempt, log);
}

}  // namespace kiln::scheduler
