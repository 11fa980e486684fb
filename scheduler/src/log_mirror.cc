// Build logs into the state database on a thread of their own
// (log_mirror.h).
#include "log_mirror.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kiln/common/logging.h"
#include "kiln/scheduler/log_store.h"
#include "kiln/scheduler/logs.h"

namespace kiln::scheduler {
namespace {

// Most bytes of one attempt's file read in one turn, so that one busy log
// does not take a whole turn's budget.
constexpr size_t kAttemptTurnBytes = 1 << 20;
// Pruning removes at most kPruneBatches * kPruneBatch attempts' rows of
// each kind per interval, so that one turn stays short.
constexpr size_t kPruneBatch = 200;
constexpr int kPruneBatches = 10;

}  // namespace

LogMirror::LogMirror(DatabaseSpec database, Options options, const Clock& clock)
    : spec_(std::move(database)), options_(options), clock_(clock) {
  if (options_.thread) thread_ = std::thread([this] { run(); });
}

LogMirror::~LogMirror() {
  {
    std::lock_guard<std::mutex> l(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LogMirror::begin(int64_t step, int64_t attempt, std::string path,
                      bool adopted) {
  std::lock_guard<std::mutex> l(mutex_);
  commands_.push_back({{step, attempt}, std::move(path), adopted, true});
}

void LogMirror::finish(int64_t step, int64_t attempt) {
  std::lock_guard<std::mutex> l(mutex_);
  commands_.push_back({{step, attempt}, "", false, false});
}

void LogMirror::run() {
  // The thread's entry: nothing may escape it.
  for (;;) {
    bool stopping = false;
    {
      std::unique_lock<std::mutex> l(mutex_);
      clock_.waitUntil(wake_, l, clock_.now() + options_.interval,
                       [this] { return stop_; });
      stopping = stop_;
    }
    try {
      turn();
    } catch (const std::exception& e) {
      logError(std::string("mirroring build logs: ") + e.what());
    }
    if (stopping) return;
  }
}

void LogMirror::warn(const std::string& what) {
  auto now = clock_.now();
  if (now - lastWarning_ < std::chrono::seconds(10)) return;
  lastWarning_ = now;
  logWarn(
      "build logs wait for the state database (they are in the log "
      "files meanwhile): " +
      what);
}

void LogMirror::takeCommands() {
  std::vector<Command> cmds;
  {
    std::lock_guard<std::mutex> l(mutex_);
    cmds.swap(commands_);
  }
  for (auto& c : cmds) {
    if (c.begin) {
      Tracked t;
      t.path = std::move(c.path);
      t.start = c.adopted ? Tracked::Start::kContinue : Tracked::Start::kClear;
      tracked_[c.key] = std::move(t);
    } else if (auto it = tracked_.find(c.key); it != tracked_.end()) {
      it->second.finished = true;
    }
  }
}

bool LogMirror::connect() {
  if (db_) return true;
  try {
    db_ = std::make_unique<StateDb>(spec_, StateDb::Existing{});
    return true;
  } catch (const SqlError& e) {
    warn(e.what());
    return false;
  }
}

void LogMirror::recover() {
  std::vector<std::pair<Key, std::string>> left;
  for (auto& a : endedLogPieces(*db_, std::numeric_limits<int64_t>::max(),
                                std::numeric_limits<size_t>::max()))
    left.push_back({{a.step, a.attempt},
                    stepLogPath(options_.stateDir, a.drvPath,
                                static_cast<int>(a.attempt))});
  for (auto& [key, path] : left) {
    Tracked t;
    t.path = path;
    t.start = Tracked::Start::kReady;
    t.finished = true;
    tracked_.try_emplace(key, std::move(t));
  }
  recovered_ = true;
}

bool LogMirror::pruneDue() const {
  return options_.pruneInterval.count() > 0 &&
         (!lastPrune_ || clock_.now() - *lastPrune_ >= options_.pruneInterval);
}

void LogMirror::pruneWhenDue() {
  if (!pruneDue()) return;
  lastPrune_ = clock_.now();
  LogPruneCount total;
  for (int batch = 0; batch < kPruneBatches; ++batch) {
    auto n =
        pruneStepLogs(*db_, clock_.nowMs(), options_.retention, kPruneBatch);
    total.pieceAttempts += n.pieceAttempts;
    total.storedLogs += n.storedLogs;
    if (n.pieceAttempts < kPruneBatch && n.storedLogs < kPruneBatch) break;
  }
  if (total.pieceAttempts > 0 || total.storedLogs > 0)
    logInfo("build logs in the database: the pieces of " +
            std::to_string(total.pieceAttempts) + " ended attempts removed, " +
            std::to_string(total.storedLogs) +
            " finished logs past their age deleted");
}

bool LogMirror::turn() {
  std::lock_guard<std::mutex> l(turnMutex_);
  takeCommands();
  if (recovered_ && tracked_.empty() && !pruneDue()) return true;
  if (!connect()) return false;
  try {
    if (!recovered_) recover();
    prepareStarts();
    bool all = appendPieces();
    storeFinished();
    pruneWhenDue();
    return all;
  } catch (const SqlError& e) {
    if (!e.transient()) throw;
    warn(e.what());
    return false;
  }
}

void LogMirror::prepareStarts() {
  for (auto& [key, t] : tracked_) {
    if (t.start == Tracked::Start::kClear)
      clearStepLog(*db_, key.first, key.second);
    else if (t.start == Tracked::Start::kContinue)
      t.written = logChunksEnd(*db_, key.first, key.second);
    t.start = Tracked::Start::kReady;
  }
}

bool LogMirror::appendPieces() {
  std::vector<LogChunk> chunks;
  std::vector<std::pair<Tracked*, int64_t>> advanced;  // attempt, new end
  size_t budget = options_.maxTurnBytes;
  bool all = true;
  for (auto& [key, t] : tracked_) {
    if (t.finished) continue;  // stored whole below
    uint64_t cap = options_.maxLogBytes ? options_.maxLogBytes : UINT64_MAX;
    if (static_cast<uint64_t>(t.written) >= cap) continue;
    size_t want =
        std::min({kAttemptTurnBytes, budget,
                  static_cast<size_t>(std::min<uint64_t>(
                      cap - static_cast<uint64_t>(t.written), SIZE_MAX))});
    StepLog file{int(key.second), StepLog::Where::kFile, key.first, t.path};
    std::string data = StepLogReader(file).read(*db_, t.written, want);
    if (want == 0 || data.size() == want) all = false;  // more may wait
    budget -= data.size();
    for (size_t k = 0; k < data.size(); k += kMaxLogChunkBytes)
      chunks.push_back({key.first, key.second,
                        t.written + static_cast<int64_t>(k),
                        data.substr(k, kMaxLogChunkBytes)});
    if (!data.empty())
      advanced.emplace_back(&t, t.written + static_cast<int64_t>(data.size()));
  }
  if (chunks.empty()) return all;
  StateDb::Transaction txn(*db_);
  appendLogChunks(*db_, chunks);
  txn.commit();
  for (auto& [t, end] : advanced) t->written = end;
  return all;
}

void LogMirror::storeFinished() {
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    auto& [key, t] = *it;
    if (!t.finished) {
      ++it;
      continue;
    }
    try {
      if (::access(t.path.c_str(), F_OK) != 0)  // no file: what it has
        storeFinishedFromChunks(*db_, key.first, key.second);
      else
        storeFinishedLog(*db_, key.first, key.second,
                         compressLogFile(t.path, options_.maxLogBytes));
    } catch (const SqlError& e) {
      if (e.transient()) throw;  // tried again next turn
      logError("storing the build log of step " + std::to_string(key.first) +
               " attempt " + std::to_string(key.second) + ": " + e.what());
    } catch (const Error& e) {
      logError("storing the build log of step " + std::to_string(key.first) +
               " attempt " + std::to_string(key.second) + ": " + e.what());
    }
    it = tracked_.erase(it);
  }
}

}  // namespace kiln::scheduler
