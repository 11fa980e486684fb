// The farm's scheduler lock (scheduler_lock.h).
#include "kiln/scheduler/scheduler_lock.h"

#include <array>
#include <random>
#include <string_view>

#include "kiln/common/file.h"
#include "kiln/common/file_lock.h"

namespace kiln::scheduler {
namespace {

// The advisory lock key of the farm's scheduler (one farm per database;
// migrations use 7164350).
constexpr int64_t kSchedulerLockKey = 7164351;

class FileSchedulerLock : public SchedulerLock {
 public:
  FileSchedulerLock(FileLock lock, std::string path)
      : lock_(std::move(lock)), path_(std::move(path)) {}
  bool held() override { return true; }
  std::string describe() const override { return path_; }

 private:
  FileLock lock_;
  std::string path_;
};

// Held shared by each session of the active scheduler's state connection,
// taken exclusively by a scheduler about to read the state.
constexpr int64_t kWriterFenceKey = 7164352;

// The server drops a silent client's session (and its locks) after
// 6 + 3 * 2 = 12 s.
constexpr const char* kKeepalives =
    "SET tcp_keepalives_idle = 6; SET tcp_keepalives_interval = 2; "
    "SET tcp_keepalives_count = 3";

// The backend pid of the session holding the farm's lock, or 0.
int64_t farmLockHolder(SqlConnection& c) {
  auto s = c.prepare(
      "SELECT coalesce(max(pid), 0) FROM pg_locks WHERE locktype = "
      "'advisory' AND objid = ? AND granted AND mode = 'ExclusiveLock'");
  s.bind(kSchedulerLockKey);
  return s.step() ? s.getInt(0) : 0;
}

// This process's lock sessions' application_name, one per use: a session
// of it that was dropped (a query deadline passed) may hold the lock until
// its backend notices, which is not another scheduler holding it. A
// command's sessions are named apart (kCommandPrefix) so that schedulers
// tell them from one another.
constexpr std::string_view kCommandPrefix = "kiln-request-";
const std::string& lockSessionName(LockUse use) {
  static const std::array<std::string, 2> names = [] {
    std::random_device r;
    std::string id = std::to_string(r()) + "-" + std::to_string(r());
    return std::array<std::string, 2>{"kiln-lock-" + id,
                                      std::string(kCommandPrefix) + id};
  }();
  return names[use == LockUse::kCommand ? 1 : 0];
}

// How many granted sessions holding the farm's lock have an
// application_name LIKE `pattern`.
int64_t holdersNamed(SqlConnection& c, const std::string& pattern) {
  auto s = c.prepare(
      "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = "
      "l.pid WHERE l.locktype = 'advisory' AND l.objid = ? AND l.granted "
      "AND a.application_name LIKE ?");
  s.bind(kSchedulerLockKey).bind(pattern);
  return s.step() ? s.getInt(0) : 0;
}

// Whether the session holding the farm's lock is one of this process's
// schedulers' (as `use`), or any process's command.
bool heldByThisProcess(SqlConnection& c, LockUse use) {
  return holdersNamed(c, lockSessionName(use)) > 0;
}
bool heldByCommand(SqlConnection& c) {
  return holdersNamed(c, std::string(kCommandPrefix) + "%") > 0;
}

LockHeldByCommand commandHolds(const std::string& where) {
  return LockHeldByCommand(
      "a kiln command holds the farm's lock (" + where +
      ") for a moment, to apply a request while no scheduler held it; "
      "trying again");
}

class AdvisorySchedulerLock : public SchedulerLock {
 public:
  explicit AdvisorySchedulerLock(std::unique_ptr<SqlConnection> c)
      : c_(std::move(c)) {
    auto s = c_->prepare("SELECT pg_backend_pid()");
    pid_ = s.step() ? s.getInt(0) : 0;
  }

  void waitForEarlierWriters() override {
    c_->prepare("SELECT pg_advisory_lock(?)").bind(kWriterFenceKey).exec();
    c_->prepare("SELECT pg_advisory_unlock(?)").bind(kWriterFenceKey).exec();
  }

  void fence(SqlConnection& writer) override {
    int64_t mine = pid_;
    std::string what = describe();
    writer.setSessionSetup([mine, what](SqlConnection& c) {
      c.exec(kKeepalives);
      auto shared = c.prepare("SELECT pg_try_advisory_lock_shared(?)");
      shared.bind(kWriterFenceKey);
      if (!shared.step() || shared.getInt(0) == 0)
        throw SqlError("another scheduler is taking over the farm (" + what +
                           "): this one no longer writes",
                       false);
      shared.reset();
      int64_t holder = farmLockHolder(c);
      if (holder == 0)
        throw SqlError("the farm's lock (" + what +
                           ") is not held: not writing until it is again",
                       true);
      if (holder != mine && heldByCommand(c)) throw commandHolds(what);
      if (holder != mine)
        throw SqlError("another scheduler holds the farm's lock (" + what +
                           "): this one no longer writes",
                       false);
    });
  }
  bool sessionEnded() override {
    if (!ended_ && c_->sessionEnded()) ended_ = true;
    return ended_;
  }
  bool held() override {
    // A session opened again by a query here would not hold the lock.
    if (sessionEnded()) return false;
    try {
      auto s = c_->prepare(
          "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
          "pid = pg_backend_pid() AND objid = ? AND granted");
      s.bind(kSchedulerLockKey);
      return s.step() && s.getInt(0) > 0;
    } catch (const SqlError&) {
      sessionEnded();  // the connection, and the lock with it, may be gone
      return false;
    }
  }
  std::string describe() const override {
    return "advisory lock " + std::to_string(kSchedulerLockKey) + " in " +
           c_->describe();
  }

 private:
  std::unique_ptr<SqlConnection> c_;
  int64_t pid_ = 0;
  bool ended_ = false;  ///< the lock's session is gone (for good)
};

}  // namespace

std::unique_ptr<SchedulerLock> SchedulerLock::tryAcquire(
    const DatabaseSpec& database, const std::string& stateDir, LockUse use) {
  if (!database.isPostgres()) {
    createDirs(stateDir);
    std::string path = stateDir + "/scheduler.lock";
    auto l = FileLock::tryAcquire(path, LockMode::kExclusive);
    if (!l) return nullptr;
    return std::make_unique<FileSchedulerLock>(std::move(*l), path);
  }
  auto c = database.connect(SqlAccess::kWrite);
  // The server drops a silent holder's session (and so the lock) after
  // 12 s: a standby takes over a scheduler whose host died, which pauses
  // dispatching after 5 s without the lock (service.cc).
  c->exec(kKeepalives);
  c->exec("SET application_name = '" + lockSessionName(use) + "'");
  auto s = c->prepare("SELECT pg_try_advisory_lock(?)");
  s.bind(kSchedulerLockKey);
  if (s.step() && s.getInt(0) != 0)
    return std::make_unique<AdvisorySchedulerLock>(std::move(c));
  s.reset();
  // A command's (this process's dropped one included) is waited for.
  if (heldByCommand(*c)) throw commandHolds(database.url);
  if (heldByThisProcess(*c, use))
    throw SqlError(
        "the farm's lock is still held by a dropped session of "
        "this process (" +
            database.url + "); trying again",
        true);
  return nullptr;
}

}  // namespace kiln::scheduler
