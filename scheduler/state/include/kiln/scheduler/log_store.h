#pragma once
/// Build logs in the state database (migration 12; docs/operations.md,
/// "Running on many machines"): what the scheduler writes on PostgreSQL so
/// that web front ends on other hosts serve the logs. While an attempt of
/// a step runs, its log goes in as pieces (`step_log_chunks`); when the
/// attempt ends, the whole log goes into one zstd-compressed row
/// (`step_logs`) and its pieces are deleted. logs.h reads them back.

#include <chrono>
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

/// An attempt whose log pieces are still in the database although it
/// ended: its step finished, or a later attempt of it started (a scheduler
/// stopped or failed over before storing it, or storing it failed).
struct EndedLogPieces {
  int64_t step = 0;
  int64_t attempt = 0;
  std::string drvPath;  ///< the step's derivation (where its log file is)
  bool stored = false;  ///< its finished log is stored (step_logs) too
};

/// Up to `limit` attempts with pieces in the database that ended before
/// `endedBeforeMs` (Unix ms; their step's stop time, or the start of a
/// later attempt), or whose finished log is stored already, whenever they
/// ended; by step and attempt. Throws SqlError.
std::vector<EndedLogPieces> endedLogPieces(StateDb& db, int64_t endedBeforeMs,
                                           size_t limit);

/// How long build logs stay in the database (docs/operations.md, "Running
/// on many machines", "Build logs"): what pruneStepLogs removes.
struct LogRetention {
  /// Pieces of an attempt that ended at least this long ago become its
  /// finished log (when none is stored) and are deleted; pieces of an
  /// attempt whose finished log is stored are deleted whatever their age.
  /// The delay leaves the scheduler's log mirror time to store the log
  /// from its file, which is whole.
  std::chrono::milliseconds endedPiecesAfter{std::chrono::hours(1)};
  /// Finished logs (step_logs rows) of steps that finished at least this
  /// long ago are deleted (the log files stay); zero keeps them.
  std::chrono::milliseconds storedLogsAfter{0};
};

/// What one pruneStepLogs call removed.
struct LogPruneCount {
  size_t pieceAttempts = 0;  ///< attempts whose pieces were removed
  size_t storedLogs = 0;     ///< finished logs deleted
};

/// Applies `retention` at `nowMs` (Unix ms) to at most `limit` attempts
/// with pieces and `limit` finished logs, each attempt in a transaction of
/// its own; call it again while a count reaches `limit`. Throws SqlError.
LogPruneCount pruneStepLogs(StateDb& db, int64_t nowMs,
                            const LogRetention& retention, size_t limit);

}  // namespace kiln::scheduler
