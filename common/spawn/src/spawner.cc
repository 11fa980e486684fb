#include "kiln/common/spawner.h"

#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <cerrno>

namespace kiln {
namespace {

/// posix_spawn's file actions and attributes, destroyed with this object.
class SpawnAttributes {
 public:
  SpawnAttributes() {
    posix_spawn_file_actions_init(&actions_);
    posix_spawnattr_init(&attr_);
  }
  ~SpawnAttributes() {
    posix_spawn_file_actions_destroy(&actions_);
    posix_spawnattr_destroy(&attr_);
  }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;

  /// Adds `spec`'s actions and flags; an errno value on failure.
  int prepare(const ProgramSpec& spec) {
    for (const FileAction& a : spec.actions) {
      int rc = add(a);
      if (rc != 0) return rc;
    }
    if (!spec.newProcessGroup) return 0;
    int rc = posix_spawnattr_setflags(&attr_, POSIX_SPAWN_SETPGROUP);
    return rc != 0 ? rc : posix_spawnattr_setpgroup(&attr_, 0);
  }
  const posix_spawn_file_actions_t* actions() const { return &actions_; }
  const posix_spawnattr_t* attr() const { return &attr_; }

 private:
  int add(const FileAction& a) {
    switch (a.kind) {
      case FileAction::Kind::kOpen:
        return posix_spawn_file_actions_addopen(&actions_, a.fd, a.path,
                                                a.openFlags, a.mode);
      case FileAction::Kind::kDup2:
        return posix_spawn_file_actions_adddup2(&actions_, a.sourceFd, a.fd);
      case FileAction::Kind::kChdir:
        return posix_spawn_file_actions_addchdir_np(&actions_, a.path);
    }
    return EINVAL;
  }

  posix_spawn_file_actions_t actions_;
  posix_spawnattr_t attr_;
};

}  // namespace

pid_t SystemSpawner::spawn(ChildEntry entry, void* arg,
                           const SpawnOptions& options) {
  if (options.cloneFlags != 0) {
    if (options.stackTop == nullptr) {
      errno = EINVAL;
      return -1;
    }
    return ::clone(entry, options.stackTop, options.cloneFlags | SIGCHLD, arg);
  }
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(entry(arg));
  return pid;
}

int SystemSpawner::spawnProgram(const ProgramSpec& spec, pid_t* pid) {
  if (spec.program == nullptr || spec.argv == nullptr || spec.envp == nullptr)
    return EINVAL;
  SpawnAttributes s;
  int rc = s.prepare(spec);
  if (rc != 0) return rc;
  auto call = spec.searchPath ? posix_spawnp : posix_spawn;
  return call(pid, spec.program, s.actions(), s.attr(), spec.argv, spec.envp);
}

ProcessSpawner& systemSpawner() {
  static SystemSpawner spawner;
  return spawner;
}

}  // namespace kiln
