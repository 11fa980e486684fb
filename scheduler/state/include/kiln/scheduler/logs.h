#pragma once
/// Where the scheduler keeps build logs: one file per attempt of a step,
/// `<state>/logs/<drv base name>.<attempt>.log` (docs/operations.md), and,
/// on a PostgreSQL farm, the state database too (log_store.h). The
/// service writes them; `kiln log` and the web read them through
/// stepLogs() and StepLogReader, from the database when it holds an
/// attempt's log, else from the file.

#include <memory>
#include <string>
#include <vector>

#include "kiln/scheduler/state_db.h"

struct ZSTD_DCtx_s;  // zstd.h

namespace kiln::scheduler {

/// The log file of attempt `attempt` (1-based) of the step building
/// `drvPath` (a full logical path or a base name). Pure; no I/O.
std::string stepLogPath(const std::string& stateDir, const std::string& drvPath,
                        int attempt);

/// The existing log files of attempts 1..`attempts` of the step building
/// `drvPath` (the step's attempt count in the state database, which bounds
/// its logs' numbers; at most 10,000), oldest first. An attempt that wrote
/// nothing has no file and is skipped. Probes by number: the logs folder,
/// which holds a file per attempt of every step ever built, is never read.
std::vector<std::pair<int, std::string>> stepLogFiles(
    const std::string& stateDir, const std::string& drvPath, int64_t attempts);
/// The same for the step `db` records for `drvPath` (a full logical path,
/// or a base name, resolved in the store folder of the steps `db` holds).
/// Empty when `db` has no such step. Throws SqlError on a broken
/// database.
std::vector<std::pair<int, std::string>> stepLogFiles(
    StateDb& db, const std::string& stateDir, const std::string& drvPath);

/// One attempt's log and where it is.
struct StepLog {
  enum class Where {
    kFile,    ///< `path` under the state directory
    kStored,  ///< the database's finished, compressed row
    kLive,    ///< the database's pieces of a running attempt
  };
  int attempt = 0;
  Where where = Where::kFile;
  int64_t step = 0;  ///< the step's database id
  std::string path;  ///< kFile
  /// Bytes of log: kStored the whole, kLive so far, kFile the file's size
  /// when listed.
  int64_t size = 0;
  int64_t storedBytes = 0;  ///< kStored: the compressed row's length
};

/// The logs of attempts 1..`step.attempts` of `step`, oldest first: from
/// the database when it holds one (its finished row, else its pieces),
/// else its file; an attempt with neither is skipped. Throws SqlError.
std::vector<StepLog> stepLogs(StateDb& db, const std::string& stateDir,
                              const StepRow& step);
/// The same for the step `db` records for `drvPath` (as stepLogFiles);
/// empty when there is none.
std::vector<StepLog> stepLogs(StateDb& db, const std::string& stateDir,
                              const std::string& drvPath);

/// A stored log that does not decompress (a corrupt or truncated row).
class CorruptLogError : public Error {
 public:
  using Error::Error;
};

/// Reads one attempt's log in bounded pieces from wherever it is: a
/// stored log is decompressed as it is read, its row fetched in slices,
/// so memory stays bounded by the slice and zstd's window whatever the
/// log's size. Sequential reads cost nothing extra; reading before the
/// last position starts decompressing again.
class StepLogReader {
 public:
  explicit StepLogReader(StepLog log);
  ~StepLogReader();
  StepLogReader(const StepLogReader&) = delete;
  StepLogReader& operator=(const StepLogReader&) = delete;

  /// Up to `max` bytes from byte `offset` of the log, read through `db`
  /// (any connection to the state database); "" at its end as far as it
  /// is known now. Throws CorruptLogError for a stored log that does not
  /// decompress, SqlError.
  std::string read(StateDb& db, int64_t offset, size_t max);
  /// What this reader reads.
  const StepLog& log() const { return log_; }

 private:
  std::string readLive(StateDb& db, int64_t offset, size_t max);
  std::string readStored(StateDb& db, int64_t offset, size_t max);
  /// Decodes more of the stored log into out_; false at its end.
  bool decodeMore(StateDb& db);
  void restart();
  [[noreturn]] void corrupt(const std::string& why) const;

  struct DCtxFree {
    void operator()(ZSTD_DCtx_s* d) const;
  };
  StepLog log_;
  std::unique_ptr<ZSTD_DCtx_s, DCtxFree> dctx_;
  std::string in_;       ///< the compressed slice being decoded
  size_t inUsed_ = 0;    ///< of in_
  int64_t fetched_ = 0;  ///< compressed bytes fetched so far
  std::string out_;      ///< decoded bytes from outPos_
  int64_t outPos_ = 0;
  bool frameDone_ = false;
};

}  // namespace kiln::scheduler
