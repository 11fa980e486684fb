#pragma once
// Shared by the in-tree sandbox plugins (compiled into each; plugins link
// no kiln library): the last steps of a builder's child between fork/clone
// and execve, and the parent's side of reporting a failed step. After fork
// only async-signal-safe calls are allowed, so everything is prepared first.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "kiln/plugin/abi.h"

namespace kiln::plugin_support {

/// Steps of a child; a failed one is reported as {stage, errno}.
enum Stage : int {
  kStageSession = 1,
  kStageStdio,
  kStageChdir,
  kStageExec,
  kStageCgroup,         ///< joining the build's control group
  kStageSandbox = 100,  ///< + the sandbox's own step number
};

/// NULL-terminated C string arrays built from strings (owned).
class CStringArray {
 public:
  /// Copies `strings`.
  explicit CStringArray(std::vector<std::string> strings);
  CStringArray(const CStringArray&) = delete;
  CStringArray& operator=(const CStringArray&) = delete;
  /// The NULL-terminated array (valid while this object lives).
  char* const* get() const { return ptrs_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> ptrs_;
};

/// What the child needs to exec the builder; every pointer stays valid in
/// the child (prepared before fork).
struct ExecPlan {
  const char* program = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* workDir = nullptr;  ///< nullptr: keep
  mode_t umask = 022;
  int devNull = -1;      ///< becomes stdin
  int outWrite = -1;     ///< becomes stdout and stderr
  int statusWrite = -1;  ///< CLOEXEC: closes on a successful exec
};

/// The spec's control-group files (ABI minor 5), or null when the host's
/// spec is older or names none.
const char* const* cgroupProcsOf(const kiln_sandbox_spec& spec);
/// Parent side: writes `pid` to each of `files` (null: none). Throws
/// kiln::plugin::Failure.
void joinCgroups(const char* const* files, pid_t pid);
/// Child side (async-signal-safe): the calling process joins each of
/// `files`; false (errno set) on failure.
bool joinCgroupsSelf(const char* const* files);

/// Writes {stage, errno} to `statusFd` and exits 127.
[[noreturn]] void childFail(int statusFd, int stage);
/// stdio, working directory, umask, default signals, close-on-exec for all
/// other descriptors, then execve. Never returns.
[[noreturn]] void execBuilder(const ExecPlan& plan);

/// The pipes and descriptors a builder child needs, opened by the parent.
struct ChildPipes {
  int outRead = -1, outWrite = -1;        ///< merged stdout/stderr
  int statusRead = -1, statusWrite = -1;  ///< the child's failure report
  int devNull = -1;
  /// Opens all (O_CLOEXEC); throws kiln::plugin::Failure.
  void open();
  /// Closes whatever is still open.
  void closeAll();
  ~ChildPipes() { closeAll(); }
};

/// Parent side: waits until the child execs (EOF) or reports a failure.
/// Returns {stage, errno} of a failure.
std::optional<std::pair<int, int>> readChildStatus(int statusRead);

/// Throws the kiln::plugin::Failure for a child's failed stage.
[[noreturn]] void throwStageFailure(int stage, int err,
                                    const std::string& program,
                                    const std::string& what);

}  // namespace kiln::plugin_support
