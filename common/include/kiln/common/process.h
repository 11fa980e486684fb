#pragma once
/// Child processes as RAII objects: the supervised children of kiln (the
/// worker's builders, the scheduler's helper commands, `kiln serve`'s
/// children and the tests' farm all start children through it). Each is
/// started by a `ProcessSpawner` (kiln/common/spawner.h), the one place
/// where kiln makes a process.
///
/// Every child runs in its own session and process group, so that killing
/// the group (`kill(-pgid, SIGKILL)`) takes down everything it started,
/// unless a descendant deliberately left the group with setsid(2). By
/// default stdout and stderr are merged into one pipe (the log stream);
/// `ProcessSpec` can keep stderr apart or send both to a file. stdin is
/// /dev/null unless `ProcessSpec::inputFile` names a file to read; the
/// environment is exactly the one given. A child gets
/// `deathSignal` (SIGKILL) when the thread that started it ends (so a
/// killed worker leaves no builder running unsupervised).
/// `ProcessLauncher`/`ChildProcess` are interfaces so that code that
/// supervises children (the worker's build runner) can be tested with
/// scripted fakes, and so that a sandbox plugin can start builders its way.

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/common/file.h"
#include "kiln/common/spawner.h"

namespace kiln {

/// How to start a child.
struct ProcessSpec {
  std::string program;            ///< executable path (no PATH search)
  std::vector<std::string> args;  ///< argv, argv[0] included; empty → {program}
  std::map<std::string, std::string> env;  ///< the complete environment
  std::string workDir;                     ///< empty: the parent's
  std::optional<mode_t> umask;             ///< unset: the parent's
  /// Look `program` up in this process's PATH when it has no '/'.
  bool searchPath = false;
  /// Non-empty: stdout and stderr go to this file (created 0644, appended
  /// to unless `truncateOutputFile`) and next() reports only the exit.
  std::string outputFile;
  bool truncateOutputFile = false;
  /// Pipe mode: stderr on a pipe of its own (events with stream 2).
  bool separateStderr = false;
  /// Non-empty: stdin reads this file (else /dev/null). Opened before the
  /// fork; a missing file throws SysError from the constructor.
  std::string inputFile;
  /// Sent to the child when the thread that started it ends.
  int deathSignal = SIGKILL;
  /// Control groups (their `cgroup.procs` files) the child joins first,
  /// before it runs anything: everything it starts belongs to them.
  std::vector<std::string> cgroupProcs;
};

/// This process's environment, for a child that should inherit it.
std::map<std::string, std::string> currentEnvironment();

/// One thing a child reported through ChildProcess::next().
struct ProcessEvent {
  enum class Kind {
    kOutput,  ///< `data` holds bytes from the merged stdout/stderr
    kExited,  ///< the child was reaped and its output drained; see `status`
    kIdle,    ///< nothing happened before the timeout
  };
  Kind kind = Kind::kIdle;
  std::string data;  ///< kOutput only
  int status = 0;    ///< kExited only: the raw wait(2) status
  /// kExited only: the child's peak resident size in bytes (wait4's
  /// ru_maxrss: the largest of the child and the descendants it waited
  /// for); 0 where unknown.
  size_t peakRssBytes = 0;
  int stream = 1;    ///< kOutput: 1 (stdout, or merged), 2 (separate stderr)
};

/// A started child and its process group. Destroying it kills the group and
/// reaps the child.
class ChildProcess {
 public:
  virtual ~ChildProcess() = default;
  /// The child's pid (also its process-group and session id).
  virtual pid_t pid() const = 0;
  /// Waits at most `timeout` for output or the child's exit. After the
  /// child exits, the rest of its process group is killed, the output pipe
  /// is drained, and then kExited is returned (again on every later call).
  virtual ProcessEvent next(std::chrono::milliseconds timeout) = 0;
  /// Sends SIGKILL to the whole process group. Idempotent; the kExited
  /// event still follows through next().
  virtual void killTree() = 0;
};

/// Starts children. Throws SysError if the program cannot be executed
/// (missing file, no permission, bad working directory).
class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  virtual std::unique_ptr<ChildProcess> start(const ProcessSpec& spec) = 0;
};

/// A real child started with fork + execve.
class Process : public ChildProcess {
 public:
  /// Starts `spec`; throws SysError naming the program and the failed step.
  explicit Process(const ProcessSpec& spec);
  /// Starts `spec` through `spawner` (a plain fork: SpawnOptions{}).
  Process(const ProcessSpec& spec, ProcessSpawner& spawner);
  /// Adopts a child started elsewhere (by a sandbox plugin): `pid` must be
  /// a child of this process and the leader of its own process group,
  /// `output` the read end of its merged stdout/stderr. Supervised, killed
  /// and reaped exactly like a child this class started.
  Process(pid_t pid, AutoCloseFD output);
  /// Kills the process group (if the child still runs) and reaps the child.
  ~Process() override;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const override { return pid_; }
  ProcessEvent next(std::chrono::milliseconds timeout) override;
  void killTree() override;
  /// Sends `sig` to the child alone (not its group), unless it was reaped.
  void signal(int sig);

 private:
  bool childHasExited();
  void reap();
  bool readOutput(AutoCloseFD& fd, int stream, ProcessEvent& ev);

  pid_t pid_ = -1;
  AutoCloseFD out_;    // read end of the stdout (or merged) pipe
  AutoCloseFD err_;    // read end of the stderr pipe (separateStderr)
  AutoCloseFD pidfd_;  // becomes readable when the child exits (may be absent)
  bool reaped_ = false;
  int status_ = 0;
  size_t peakRssBytes_ = 0;
  Clock::TimePoint drainDeadline_{};
};

/// Launches real `Process`es through a ProcessSpawner.
class RealProcessLauncher : public ProcessLauncher {
 public:
  /// `spawner` must outlive this launcher.
  explicit RealProcessLauncher(ProcessSpawner& spawner = systemSpawner())
      : spawner_(spawner) {}
  std::unique_ptr<ChildProcess> start(const ProcessSpec& spec) override {
    return std::make_unique<Process>(spec, spawner_);
  }

 private:
  ProcessSpawner& spawner_;
};

/// Runs `child` until it exits or `timeout` passes on `clock`, appending
/// its output to `output` if given. Returns the wait status, or nullopt on
/// timeout (the child keeps running; the caller still owns it).
std::optional<int> waitForExit(ChildProcess& child,
                               std::chrono::milliseconds timeout,
                               std::string* output = nullptr,
                               const Clock& clock = RealClock::instance());

/// "exited with code N" / "killed by signal N (NAME)" for a wait status.
std::string describeWaitStatus(int status);

/// Whether a live (not zombie) process with this pid exists; reads
/// /proc/<pid>/stat. Used to check that a killed tree is really gone.
bool processAlive(pid_t pid);

/// This machine's host name (gethostname), or "" when it has none.
std::string hostName();

}  // namespace kiln
