#pragma once
/// Evaluations run by `kiln evaluator` hosts (docs/operations.md, "Running
/// on many machines"), as tables of the state database: an evaluator
/// *claims* a jobset (one claim per jobset, with a lease it renews while it
/// evaluates; an expired claim is anybody's), evaluates it on its own host
/// and *publishes* the result — the jobs and their `.drv` closures as an
/// opaque byte stream, stored in chunks — in one transaction that also
/// drops its claim. A scheduler started with `--evaluations remote` takes
/// the oldest result, checks and imports it, records the evaluation and
/// deletes the result in the transaction that records it. This layer only
/// stores rows and bytes; the stream's format is eval_transfer.h's.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/common/stream.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// Bytes per stored chunk of a result (before its base64 text).
inline constexpr size_t kEvalChunkBytes = size_t{4} << 20;
/// Most chunks one result may have (16 GiB of compressed stream).
inline constexpr int64_t kMaxEvalChunks = 4096;

/// One jobset's evaluation as an evaluator claimed it.
struct EvalClaim {
  int64_t jobset = 0;
  std::string evaluator;  ///< the evaluator's name (host and process)
  std::optional<int64_t> request;  ///< the `jobset-eval` request, if any
  bool force = false;  ///< evaluate even if the inputs did not change
  int64_t claimedMs = 0;
  int64_t leaseUntilMs = 0;
};

/// Claims `claim.jobset` for `claim.evaluator` unless another evaluator
/// holds an unexpired claim on it (expired claims, leaseUntilMs before
/// `nowMs`, are removed first). Returns whether the claim is now this one.
/// Throws SqlError.
bool claimEvaluation(StateDb& db, const EvalClaim& claim, int64_t nowMs);
/// Extends `evaluator`'s claim on `jobset` to `leaseUntilMs`; false if the
/// claim is no longer its own (it expired and another took it).
bool renewEvalClaim(StateDb& db, int64_t jobset, const std::string& evaluator,
                    int64_t leaseUntilMs);
/// Drops `evaluator`'s claim on `jobset` (nothing if it holds none).
void releaseEvalClaim(StateDb& db, int64_t jobset,
                      const std::string& evaluator);
/// Every claim, expired ones included, by jobset.
std::vector<EvalClaim> evalClaims(StateDb& db);

/// A published result waiting for the scheduler.
struct EvalResultRow {
  int64_t id = 0;
  int64_t jobset = 0;
  std::optional<int64_t> request;
  std::string evaluator;
  int64_t createdMs = 0;
  int64_t chunks = 0;  ///< stored chunks (0..kMaxEvalChunks)
  int64_t bytes = 0;   ///< the stream's length
};

/// The waiting results, oldest first.
std::vector<EvalResultRow> evalResults(StateDb& db);
/// Deletes result `id` and its chunks.
void deleteEvalResult(StateDb& db, int64_t id);

/// Publishes one result: the constructor inserts its row, write() stores
/// the stream in chunks of kEvalChunkBytes, finish() stores the last one
/// and the totals. Use it inside a StateDb::Transaction that also releases
/// the claim, so the scheduler sees all of a result or none. Throws
/// SqlError, and Error past kMaxEvalChunks.
class EvalResultWriter : public Sink {
 public:
  /// `row.id`, `chunks` and `bytes` are ignored.
  EvalResultWriter(StateDb& db, const EvalResultRow& row);
  void write(std::string_view data) override;
  /// Stores what is buffered and notifies kRequestsChannel (delivered at
  /// commit: the scheduler looks for results when woken); returns the
  /// result's id.
  int64_t finish();

 private:
  void flush();
  StateDb& db_;
  int64_t id_ = 0;
  int64_t chunks_ = 0;
  int64_t bytes_ = 0;
  std::string buffer_;
};

/// Reads result `row`'s stream back, one chunk in memory at a time, from
/// its own connection `db` (any thread may use its own). Reads throw
/// FormatError for a missing or malformed chunk and when the stream is
/// longer or shorter than the row says.
class EvalResultReader : public Source {
 public:
  EvalResultReader(StateDb& db, const EvalResultRow& row);
  size_t read(char* data, size_t len) override;

 private:
  StateDb& db_;
  EvalResultRow row_;
  int64_t next_ = 0;  ///< the next chunk to load
  int64_t read_ = 0;  ///< bytes handed out so far
  std::string chunk_;
  size_t pos_ = 0;
};

}  // namespace kiln::scheduler
