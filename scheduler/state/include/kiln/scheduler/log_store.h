#pragma once
/// Build logs in the state database (migration 12; docs/operations.md,
/// "Running on many machines"): what the scheduler writes on PostgreSQL so
/// that web front ends on other hosts serve the logs. While an attempt of
/// a step runs, its log goes in as pieces (`step_log_chunks`); when the
/// attempt ends, the whole log goes into one zstd-compressed row
/// (`step_logs`) and its pieces are deleted. logs.h reads them back.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// A piece of a running attempt's log: `data` at byte `pos` of it.
struct LogChunk {
  int64_t step = 0;  ///< the step's database id
  int64_t attempt = 0;
  int64_t pos = 0;
  std::string data;
};

/// The most bytes one piece holds; writers split larger ones.
inline constexpr size_t kMaxLogChunkBytes = 256 << 10;

/// Inserts `chunks` (each at most kMaxLogChunkBytes): on PostgreSQL one
/// multi-row INSERT per 64 pieces, on SQLite one row per statement. Run it
/// inside a transaction to make it one. Throws SqlError.
void appendLogChunks(StateDb& db, const std::vector<LogChunk>& chunks);

/// The byte after the last piece of attempt `attempt` of step `step` (0:
/// none), where an adopted attempt's log goes on.
int64_t logChunksEnd(StateDb& db, int64_t step, int64_t attempt);

/// Deletes what the database holds of attempt `attempt` of step `step`
/// (pieces and finished row): an attempt with that number starts afresh.
void clearStepLog(StateDb& db, int64_t step, int64_t attempt);

/// A finished log, zstd-compressed (one frame with a checksum).
struct CompressedLog {
  int64_t size = 0;  ///< uncompressed bytes
  std::string body;
};

/// Compresses `text`.
CompressedLog compressLog(std::string_view text);
/// Compresses the first `maxBytes` of the file `path` (0: all of it), read
/// in pieces; an empty log if the file does not exist. Throws Error.
CompressedLog compressLogFile(const std::string& path, uint64_t maxBytes);

/// Stores `log` as the finished log of attempt `attempt` of step `step`
/// (replacing one stored before) and deletes its pieces, in one
/// transaction. Throws SqlError.
void storeFinishedLog(StateDb& db, int64_t step, int64_t attempt,
                      const CompressedLog& log);
/// Stores the pieces the database holds of attempt `attempt` of step
/// `step` (up to the first gap) as its finished log, when its file is
/// gone; nothing if it has none. Throws SqlError.
void storeFinishedFromChunks(StateDb& db, int64_t step, int64_t attempt);

}  // namespace kiln::scheduler
