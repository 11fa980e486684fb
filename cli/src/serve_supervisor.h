#pragma once
// The children of `kiln serve` (docs/operations.md, "`kiln serve`"): each
// a kiln process with its output in a log file, restarted with back-off
// when it exits while serve runs.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/common/process.h"

namespace kiln::cli {

/// The wait before restart number `failures` (1, 2, ...) of a child that
/// keeps dying: 0.5 s, doubled each time, at most 30 s.
std::chrono::milliseconds restartBackoff(unsigned failures);

/// A supervised kiln child (this same executable) in its own session, so
/// Ctrl-C reaches serve only, which stops the children in order. It gets
/// SIGTERM if serve dies. Its log file is appended to across restarts.
/// Not thread-safe; `clock` must outlive it.
class SupervisedChild {
 public:
  /// Does not start it yet (start()).
  SupervisedChild(std::string name, std::vector<std::string> args,
                  std::string logFile, const Clock& clock);
  /// Stops it (stop(5 s)).
  ~SupervisedChild();
  SupervisedChild(const SupervisedChild&) = delete;
  SupervisedChild& operator=(const SupervisedChild&) = delete;

  const std::string& name() const { return name_; }
  const std::string& log() const { return log_; }
  /// Starts it; throws SysError if it cannot be spawned.
  void start();
  /// Whether it runs; reaps it (keeping its status) once it exited.
  bool running();
  /// What the log holds since the latest start.
  std::string logSinceStart() const;
  /// Supervision, called every loop: if it exited, schedules a restart
  /// after restartBackoff() (a child that ran a minute starts the count
  /// again) and returns a line saying so; if a restart is due, starts it
  /// and returns a line saying so; otherwise "".
  std::string supervise();
  /// Its process id (of the latest start; -1 before the first).
  pid_t pid() const { return child_ ? child_->pid() : -1; }
  /// How many times it was restarted.
  unsigned restarts() const { return restarts_; }
  /// SIGTERM, then SIGKILL of its process tree after `grace`; returns how
  /// it ended (describeWaitStatus). Not restarted afterwards.
  std::string stop(std::chrono::milliseconds grace);

 private:
  std::optional<int> waitExit(std::chrono::milliseconds timeout);

  std::string name_;
  std::vector<std::string> args_;
  std::string log_;
  const Clock& clock_;
  std::unique_ptr<Process> child_;
  std::optional<int> status_;
  size_t logOffset_ = 0;
  Clock::TimePoint startedAt_{};
  std::optional<Clock::TimePoint> restartAt_;
  unsigned failures_ = 0;
  unsigned restarts_ = 0;
  bool stopped_ = false;
};

}  // namespace kiln::cli
