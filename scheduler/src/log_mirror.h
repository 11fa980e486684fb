#pragma once
// Build logs into the state database (log_store.h; docs/operations.md,
// "Running on many machines"), for web front ends on other hosts. The
// service thread writes each attempt's log file as today and only tells
// the mirror when an attempt starts and ends; the mirror's own thread,
// with its own connection, reads what the files gained every interval and
// inserts it as pieces (one transaction of multi-row INSERTs per turn),
// and when an attempt has ended stores its whole file compressed in one
// row, deleting its pieces. A slow or absent database therefore never
// holds up the service thread: the files hold what waits, and the mirror
// catches up when the database is back. Made on PostgreSQL only.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/scheduler/log_store.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

class LogMirror {
 public:
  struct Options {
    /// How often what the files gained goes to the database.
    std::chrono::milliseconds interval{250};
    /// The most bytes of one attempt's file mirrored (the log limit plus
    /// room for kiln's own notes; 0: all).
    uint64_t maxLogBytes = 0;
    /// The most bytes of pieces one turn inserts (the rest waits a turn).
    size_t maxTurnBytes = 8 << 20;
    /// Whether a thread of its own runs turns (tests call turn()).
    bool thread = true;
    /// The scheduler's state directory (its log files), for the attempts
    /// a scheduler that stopped left as pieces (see recover()).
    std::string stateDir;
    /// What of the logs in the database is removed (log_store.h), and
    /// how often (zero: never); the first turn prunes.
    LogRetention retention;
    std::chrono::milliseconds pruneInterval{std::chrono::minutes(10)};
  };

  /// Mirrors into `database` (connected on the mirror's thread, again
  /// after a failure). `clock` (borrowed) paces warnings.
  LogMirror(DatabaseSpec database, Options options, const Clock& clock);
  /// Stops the thread after one last turn (what fails then stays in the
  /// files only).
  ~LogMirror();
  LogMirror(const LogMirror&) = delete;
  LogMirror& operator=(const LogMirror&) = delete;

  /// Attempt `attempt` of step `step` writes its log to `path` from now
  /// on. `adopted`: it goes on from before a restart (the pieces the
  /// database holds are kept); else it starts afresh (any are deleted).
  void begin(int64_t step, int64_t attempt, std::string path, bool adopted);
  /// The attempt ended; its file is complete.
  void finish(int64_t step, int64_t attempt);
  /// Runs one turn on the calling thread; returns whether nothing waits
  /// any more (everything begun is mirrored up to its file's end now).
  bool turn();

 private:
  using Key = std::pair<int64_t, int64_t>;  // step, attempt
  struct Tracked {
    std::string path;
    int64_t written = 0;  ///< bytes of the file in the database
    enum class Start { kClear, kContinue, kReady } start = Start::kClear;
    bool finished = false;
  };
  struct Command {
    Key key;
    std::string path;  ///< begin: the file; finish: ""
    bool adopted = false;
    bool begin = true;
  };

  void run();
  /// Applies the queued begins and finishes to tracked_.
  void takeCommands();
  /// Connects if not connected; false (warned) when it cannot. Once
  /// connected, recovers.
  bool connect();
  /// Stores whole, from their files, the attempts whose pieces a stopped
  /// scheduler left behind: those of finished steps and those an attempt
  /// after them superseded (a running one is adopted, or retried).
  void recover();
  /// Brings each new attempt's rows to where it starts.
  void prepareStarts();
  /// Inserts what the files of running attempts gained; true if all.
  bool appendPieces();
  /// Stores the ended attempts' logs whole.
  void storeFinished();
  /// Applies Options::retention when it is due.
  void pruneWhenDue();
  /// Whether pruneWhenDue has work now.
  bool pruneDue() const;
  /// Warns (at most every 10 s) that `what` failed.
  void warn(const std::string& what);

  DatabaseSpec spec_;
  Options options_;
  const Clock& clock_;
  std::mutex mutex_;  ///< guards commands_ and stop_
  std::condition_variable wake_;
  std::vector<Command> commands_;
  bool stop_ = false;
  std::mutex turnMutex_;  ///< one turn at a time; guards what follows
  std::unique_ptr<StateDb> db_;
  std::map<Key, Tracked> tracked_;
  bool recovered_ = false;
  std::optional<Clock::TimePoint> lastPrune_;
  Clock::TimePoint lastWarning_{};
  std::thread thread_;
};

}  // namespace kiln::scheduler
