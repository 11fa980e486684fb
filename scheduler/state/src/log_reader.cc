// Build logs: the reading half (logs.h), over the files and the database's
// rows (log_store.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <map>

#include "kiln/common/file.h"
#include "kiln/scheduler/log_store.h"
#include "kiln/scheduler/logs.h"

namespace kiln::scheduler {
namespace {

constexpr int64_t kMaxAttempts = 10000;
constexpr size_t kSliceBytes = 256 << 10;  // compressed bytes per fetch
constexpr size_t kDecodeBytes = 256 << 10;
constexpr int kWindowLogMax = 27;  // 128 MiB, as the binary cache's reader

int64_t sizeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? int64_t(st.st_size) : -1;
}

std::string preadFrom(const std::string& path, int64_t offset, size_t max) {
  AutoCloseFD fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return "";
  std::string out(max, '\0');
  ssize_t n = ::pread(fd.get(), out.data(), max, offset);
  out.resize(n > 0 ? size_t(n) : 0);
  return out;
}

}  // namespace

std::vector<StepLog> stepLogs(StateDb& db, const std::string& stateDir,
                              const StepRow& step) {
  std::map<int64_t, StepLog> inDb;
  auto stored = db.db().prepare(
      "SELECT attempt, size, length(body) FROM step_logs WHERE step = ?");
  stored.bind(step.id);
  while (stored.step())
    inDb[stored.getInt(0)] = {static_cast<int>(stored.getInt(0)),
                              StepLog::Where::kStored,
                              step.id,
                              "",
                              stored.getInt(1),
                              stored.getInt(2)};
  auto live = db.db().prepare(
      "SELECT attempt, max(pos + length(data)) FROM step_log_chunks WHERE "
      "step = ? GROUP BY attempt");
  live.bind(step.id);
  while (live.step())
    inDb.try_emplace(live.getInt(0), StepLog{static_cast<int>(live.getInt(0)),
                                             StepLog::Where::kLive, step.id, "",
                                             live.getInt(1), 0});
  // The database may know an attempt whose start is not recorded yet.
  int64_t last =
      std::max(step.attempts, inDb.empty() ? 0 : inDb.rbegin()->first);
  last = std::clamp<int64_t>(last, 0, kMaxAttempts);
  std::vector<StepLog> out;
  for (int n = 1; n <= last; ++n) {
    if (auto it = inDb.find(n); it != inDb.end()) {
      out.push_back(it->second);
      continue;
    }
    std::string path = stepLogPath(stateDir, step.drvPath, n);
    if (int64_t size = stateDir.empty() ? -1 : sizeOf(path); size >= 0)
      out.push_back({n, StepLog::Where::kFile, step.id, path, size, 0});
  }
  return out;
}

std::vector<StepLog> stepLogs(StateDb& db, const std::string& stateDir,
                              const std::string& drvPath) {
  auto step = drvPath.find('/') == std::string::npos
                  ? db.stepByBaseName(drvPath)
                  : db.stepByDrv(drvPath);
  if (!step) return {};
  return stepLogs(db, stateDir, *step);
}

void StepLogReader::DCtxFree::operator()(ZSTD_DCtx_s* d) const {
  ZSTD_freeDCtx(d);
}

StepLogReader::StepLogReader(StepLog log) : log_(std::move(log)) {}

StepLogReader::~StepLogReader() = default;

std::string StepLogReader::read(StateDb& db, int64_t offset, size_t max) {
  if (offset < 0 || max == 0) return "";
  switch (log_.where) {
    case StepLog::Where::kFile:
      return preadFrom(log_.path, offset, max);
    case StepLog::Where::kLive:
      return readLive(db, offset, max);
    case StepLog::Where::kStored:
      return readStored(db, offset, max);
  }
  return "";
}

std::string StepLogReader::readLive(StateDb& db, int64_t offset, size_t max) {
  // Pieces are at most kMaxLogChunkBytes: one starting before `offset -
  // kMaxLogChunkBytes` ends before it.
  auto s = db.db().prepare(
      "SELECT pos, data FROM step_log_chunks WHERE step = ? AND attempt = ? "
      "AND pos > ? AND pos < ? ORDER BY pos");
  s.bind(log_.step)
      .bind(int64_t{log_.attempt})
      .bind(offset - int64_t{kMaxLogChunkBytes})
      .bind(offset + static_cast<int64_t>(max));
  std::string out;
  int64_t at = offset;
  while (s.step() && out.size() < max) {
    int64_t pos = s.getInt(0);
    if (pos > at) break;  // not written yet (or written out of order)
    std::string data = s.getBlob(1);
    int64_t end = pos + static_cast<int64_t>(data.size());
    if (end <= at) continue;
    size_t from = static_cast<size_t>(at - pos);
    out.append(data, from, std::min(data.size() - from, max - out.size()));
    at = offset + static_cast<int64_t>(out.size());
  }
  return out;
}

void StepLogReader::restart() {
  if (!dctx_) {
    dctx_.reset(ZSTD_createDCtx());
    if (!dctx_) throw Error("zstd: out of memory");
  }
  ZSTD_DCtx_reset(dctx_.get(), ZSTD_reset_session_and_parameters);
  ZSTD_DCtx_setParameter(dctx_.get(), ZSTD_d_windowLogMax, kWindowLogMax);
  in_.clear();
  inUsed_ = 0;
  fetched_ = 0;
  out_.clear();
  outPos_ = 0;
  frameDone_ = false;
}

void StepLogReader::corrupt(const std::string& why) const {
  throw CorruptLogError("the stored log of step " + std::to_string(log_.step) +
                        " attempt " + std::to_string(log_.attempt) +
                        " is corrupt: " + why);
}

std::string StepLogReader::readStored(StateDb& db, int64_t offset, size_t max) {
  if (!dctx_ || offset < outPos_) restart();
  for (;;) {
    int64_t end = outPos_ + static_cast<int64_t>(out_.size());
    if (offset < end) {
      size_t from = static_cast<size_t>(offset - outPos_);
      return out_.substr(from, max);
    }
    outPos_ = end;
    out_.clear();
    if (!decodeMore(db)) return "";
  }
}

bool StepLogReader::decodeMore(StateDb& db) {
  if (frameDone_) return false;
  if (inUsed_ == in_.size()) {
    if (fetched_ >= log_.storedBytes) corrupt("it ends before its last frame");
    auto s = db.db().prepare(
        "SELECT substr(body, ?, ?) FROM step_logs WHERE step = ? AND "
        "attempt = ?");
    s.bind(fetched_ + 1)
        .bind(int64_t{kSliceBytes})
        .bind(log_.step)
        .bind(int64_t{log_.attempt});
    if (!s.step())
      throw Error("the stored log of step " + std::to_string(log_.step) +
                  " attempt " + std::to_string(log_.attempt) +
                  " is no longer in the database");
    in_ = s.getBlob(0);
    inUsed_ = 0;
    if (in_.empty()) corrupt("it is shorter than its recorded length");
    fetched_ += static_cast<int64_t>(in_.size());
  }
  out_.resize(kDecodeBytes);
  ZSTD_inBuffer in{in_.data(), in_.size(), inUsed_};
  ZSTD_outBuffer o{out_.data(), out_.size(), 0};
  size_t ret = ZSTD_decompressStream(dctx_.get(), &o, &in);
  if (ZSTD_isError(ret)) corrupt(ZSTD_getErrorName(ret));
  inUsed_ = in.pos;
  out_.resize(o.pos);
  if (ret == 0) {
    frameDone_ = true;
    if (outPos_ + static_cast<int64_t>(out_.size()) != log_.size)
      corrupt("it holds " +
              std::to_string(outPos_ + static_cast<int64_t>(out_.size())) +
              " bytes, its row says " + std::to_string(log_.size));
  }
  return true;
}

}  // namespace kiln::scheduler
