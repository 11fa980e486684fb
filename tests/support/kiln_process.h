#pragma once
/// A `kiln ARGS...` child process for tests (the farm's scheduler and
/// workers, the scheduler of CLI tests), started through the one process
/// spawner (`kiln::Process`).

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/common/process.h"

namespace kiln::test {

/// A `kiln ARGS...` child process whose stdout and stderr go to a log file
/// (truncated at start). It inherits this process's environment plus
/// `extraEnv`. Destroying it SIGKILLs and reaps it if it runs; it is also
/// SIGKILLed when the thread that started it exits (PR_SET_PDEATHSIG), so
/// a killed test leaves no process behind. With `netns` it runs in that
/// named network namespace (`ip netns exec NETNS kiln ...`, which execs
/// kiln in place: the pid is kiln's).
class KilnProcess {
 public:
  /// Starts the process; throws SysError if it cannot be spawned.
  KilnProcess(const std::vector<std::string>& args, std::string logFile,
              const std::map<std::string, std::string>& extraEnv = {},
              const std::string& netns = "");
  ~KilnProcess();
  KilnProcess(const KilnProcess&) = delete;
  KilnProcess& operator=(const KilnProcess&) = delete;

  pid_t pid() const { return proc_->pid(); }
  /// Whether it has not exited yet (reaps it without blocking if it has).
  bool running();
  /// Its exit code once it exited (128+signal if killed), else nullopt.
  std::optional<int> exitCode();
  /// Waits up to `timeout` for it to exit; returns its exit code or
  /// nullopt (it still runs).
  std::optional<int> waitExit(std::chrono::milliseconds timeout);
  /// Sends `sig` (no-op once it has exited).
  void signal(int sig);
  /// SIGKILL, then waits; returns the exit code (128+9 normally).
  int kill();
  /// SIGTERM, waits up to `grace`, then SIGKILL; returns the exit code.
  int stop(std::chrono::milliseconds grace = std::chrono::seconds(30));
  /// Everything it wrote so far ("" before it wrote anything).
  std::string log() const;
  const std::string& logFile() const { return logFile_; }
  /// Polls until its log contains `text`; false if it exited first or
  /// `timeout` passed.
  bool waitForLog(const std::string& text, std::chrono::milliseconds timeout);

 private:
  std::unique_ptr<Process> proc_;
  std::optional<int> exit_;
  std::string logFile_;
};

}  // namespace kiln::test
