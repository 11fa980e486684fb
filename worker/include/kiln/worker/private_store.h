#pragma once
/// A worker's private view of the store (docs/worker.md, "Several workers on
/// one machine"). Unsandboxed builders write to the logical store directory
/// (`/nix/store`) directly, so a worker whose physical store lives elsewhere
/// (`<state>/store`) enters a mount namespace of its own and bind-mounts its
/// physical store on the logical directory. Each worker process then sees its
/// own store at `/nix/store`, and several can run on one host. The host's
/// mounts are untouched (the namespace's root is made recursively private).

#include <string>

namespace kiln::worker {

/// The system calls behind enterPrivateStore; a fake records them in tests.
/// Each throws SysError (with the errno) when the call fails.
class MountSystem {
 public:
  virtual ~MountSystem() = default;
  /// unshare(CLONE_NEWNS): a mount namespace of this process's own.
  virtual void unshareMountNamespace() = 0;
  /// mount(NULL, "/", NULL, MS_REC | MS_PRIVATE): no mount made here
  /// propagates back to the host.
  virtual void makeRootPrivate() = 0;
  /// Creates `path` and its missing parents (mode 0755).
  virtual void makeDirs(const std::string& path) = 0;
  /// mount(source, target, NULL, MS_BIND).
  virtual void bindMount(const std::string& source,
                         const std::string& target) = 0;
};

/// The real system calls. Process-wide, stateless.
MountSystem& realMountSystem();

/// Gives the calling process its own view of the store: checks the layout,
/// then unshares the mount namespace, makes `/` rprivate, creates
/// `physicalStore` and `logicalDir` if missing and bind-mounts the first on
/// the second. Must run before the process starts any thread (unshare fails
/// with EINVAL otherwise), so before any ZeroMQ context exists.
/// Both paths must be absolute and normalised, differ, and neither may lie
/// inside the other (Error naming them). A refused system call (not root,
/// no CAP_SYS_ADMIN, a container without mount rights) throws Error saying
/// which call failed and what to do instead.
void enterPrivateStore(const std::string& physicalStore,
                       const std::string& logicalDir,
                       MountSystem& sys = realMountSystem());

}  // namespace kiln::worker
