#pragma once
/// The one place where kiln starts a process: every spawn site (the
/// supervised `Process`, the sandbox plugins' builders, the evaluator's
/// `--workers` children, the plugins' helper commands, the native
/// platform's i686 probe) goes through a `ProcessSpawner`, so that a test
/// can see or fail each start (`tests/support/fake_spawner.h`).
///
/// This library (`kiln_spawn`) depends on libc alone: plugins link it
/// (they link no other kiln library) and `kiln_common` re-exports it. It
/// never throws; failures come back as errno values, and each caller says
/// them its own way (SysError in kiln, a Failure in a plugin).
///
/// Two ways to start a child, because the sites have reasons for both:
/// `spawn` runs a function in the child (fork, or clone(2) when the
/// options ask for namespaces or a shared address space), for children that
/// prepare themselves before execve or never exec (the evaluator's
/// workers); `spawnProgram` executes a program with file actions
/// (posix_spawn: no copy of the parent's page tables), for plain commands.

#include <sys/types.h>

#include <vector>

namespace kiln {

/// A child's entry point for ProcessSpawner::spawn: runs in the child, with
/// only async-signal-safe calls (the parent may have threads). Ends in
/// execve or _exit; if it returns, the child exits with its value.
using ChildEntry = int (*)(void* arg);

/// How ProcessSpawner::spawn makes the child.
struct SpawnOptions {
  /// clone(2) flags beyond the exit signal (CLONE_NEW* namespaces,
  /// CLONE_VM); 0: a plain fork(2).
  int cloneFlags = 0;
  /// Top of the child's stack for clone (it grows down); needed when
  /// cloneFlags is not 0, and it must stay mapped until the child executed
  /// or was reaped.
  void* stackTop = nullptr;
};

/// One step of a spawned program's descriptors, applied in order.
struct FileAction {
  enum class Kind { kOpen, kDup2, kChdir };
  Kind kind = Kind::kDup2;
  int fd = -1;                 ///< the child's descriptor (kOpen, kDup2)
  int sourceFd = -1;           ///< kDup2: the parent's descriptor
  const char* path = nullptr;  ///< kOpen: the file; kChdir: the folder
  int openFlags = 0;           ///< kOpen
  mode_t mode = 0;             ///< kOpen
};

/// A program for ProcessSpawner::spawnProgram. Pointers must stay valid
/// during the call.
struct ProgramSpec {
  const char* program = nullptr;  ///< a path, or a name when searchPath
  char* const* argv = nullptr;    ///< NULL-terminated, argv[0] included
  char* const* envp = nullptr;    ///< NULL-terminated
  bool searchPath = false;        ///< look `program` up in PATH (posix_spawnp)
  bool newProcessGroup = false;  ///< the child leads a process group of its own
  std::vector<FileAction> actions;
};

/// Starts child processes. Implementations are thread-safe.
class ProcessSpawner {
 public:
  virtual ~ProcessSpawner() = default;
  /// Starts a child running entry(arg) as `options` say; returns its pid,
  /// or -1 with errno set.
  virtual pid_t spawn(ChildEntry entry, void* arg,
                      const SpawnOptions& options) = 0;
  /// Starts `spec`; returns 0 and sets `*pid`, or returns an errno value
  /// (the program could not be started).
  virtual int spawnProgram(const ProgramSpec& spec, pid_t* pid) = 0;
};

/// The real system calls: fork(2) or clone(2), posix_spawn[p](3).
class SystemSpawner final : public ProcessSpawner {
 public:
  pid_t spawn(ChildEntry entry, void* arg,
              const SpawnOptions& options) override;
  int spawnProgram(const ProgramSpec& spec, pid_t* pid) override;
};

/// A process-wide SystemSpawner (it has no state).
ProcessSpawner& systemSpawner();

}  // namespace kiln
