#pragma once
// The child side of the linux sandbox: what runs between clone() (in fresh
// user, mount, PID, IPC, UTS and, unless the build may use the network,
// network namespaces) and execve of the builder. Everything is prepared by
// the parent in a ChildPlan; the child only makes system calls (it may be
// the child of a multi-threaded process, where allocating is unsafe, and
// it shares the parent's memory until execve: clone(CLONE_VM), so it must
// write nothing but its own stack).

#include <linux/filter.h>
#include <sys/types.h>

#include <vector>

#include "exec_child.h"

namespace kiln::sandbox_linux {

/// Sandbox steps, reported as kStageSandbox + step on failure.
enum SandboxStep : int {
  kStepSync = 1,      ///< waiting for the parent to write the id maps
  kStepPrivate,       ///< making every mount private
  kStepMount,         ///< one of the mounts (see the plan)
  kStepPivot,         ///< pivot_root into the new root
  kStepHostname,      ///< sethostname / setdomainname
  kStepLoopback,      ///< bringing up `lo` in the new network namespace
  kStepIdentity,      ///< dropping groups, setgid, setuid
  kStepCapabilities,  ///< bounding set, ambient set, no_new_privs, capset
  kStepParent,        ///< the parent died before the builder started
  kStepSeccomp,       ///< installing the system-call filter
};

/// A human name for a step (parent side, for error messages).
const char* stepName(int step);

/// One mount(2) call, optionally followed by a read-only bind remount.
struct MountOp {
  const char* source = nullptr;
  const char* target = nullptr;
  const char* fstype = nullptr;
  unsigned long flags = 0;
  const char* data = nullptr;
  /// Then remount MS_BIND|MS_REMOUNT|MS_RDONLY|readOnlyFlags (which must
  /// carry the source's locked flags: nosuid, nodev, noexec, atime).
  bool readOnly = false;
  unsigned long readOnlyFlags = 0;
  const char* chmodTarget = nullptr;  ///< chmod 0666 after mounting
};

/// Everything the child does, in order.
struct ChildPlan {
  int syncRead = -1;                ///< EOF/byte: the id maps are written
  const char* root = nullptr;       ///< the new root (host path)
  const MountOp* mounts = nullptr;  ///< done in order, before pivot_root
  size_t mountCount = 0;
  bool ownNetwork = true;  ///< in a new network namespace: bring `lo` up
  bool dropGroups = true;  ///< setgroups allowed (the worker is root)
  uid_t uid = 1000;        ///< inside the namespace
  gid_t gid = 100;
  /// The system-call filter installed last (seccomp_filter.h); null: none.
  const sock_fprog* seccomp = nullptr;
  plugin_support::ExecPlan exec;  ///< paths as seen inside the new root
};

/// clone() entry point: `arg` is a ChildPlan*. Never returns.
int childMain(void* arg);

}  // namespace kiln::sandbox_linux
