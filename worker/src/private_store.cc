// A private mount namespace with the worker's store bind-mounted on the
// logical store directory (docs/worker.md, "Several workers on one machine").
#include "kiln/worker/private_store.h"

#include <sched.h>
#include <sys/mount.h>

#include <cerrno>

#include "kiln/common/error.h"
#include "kiln/common/file.h"

namespace kiln::worker {
namespace {

class RealMountSystem final : public MountSystem {
 public:
  void unshareMountNamespace() override {
    if (unshare(CLONE_NEWNS) != 0) throwSysError("unshare(CLONE_NEWNS)");
  }
  void makeRootPrivate() override {
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
      throwSysError("making / private (mount MS_REC|MS_PRIVATE)");
  }
  void makeDirs(const std::string& path) override { createDirs(path); }
  void bindMount(const std::string& source,
                 const std::string& target) override {
    if (mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0)
      throwSysError("bind-mounting " + source + " on " + target);
  }
};

// Absolute, no empty, "." or ".." component, no trailing slash, not "/".
void checkDir(const std::string& what, const std::string& p) {
  bool ok = p.size() > 1 && p[0] == '/' && p.back() != '/';
  for (size_t i = 1, start = 1; ok && i <= p.size(); i++) {
    if (i < p.size() && p[i] != '/') continue;
    std::string part = p.substr(start, i - start);
    ok = !part.empty() && part != "." && part != "..";
    start = i + 1;
  }
  if (!ok)
    throw Error("worker: --private-store: the " + what + " '" + p +
                "' must be an absolute, normalised directory other than /");
}

bool inside(const std::string& inner, const std::string& outer) {
  return inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
         inner[outer.size()] == '/';
}

}  // namespace

MountSystem& realMountSystem() {
  static RealMountSystem sys;
  return sys;
}

void enterPrivateStore(const std::string& physicalStore,
                       const std::string& logicalDir, MountSystem& sys) {
  checkDir("worker's store", physicalStore);
  checkDir("logical store directory", logicalDir);
  if (physicalStore == logicalDir || inside(physicalStore, logicalDir) ||
      inside(logicalDir, physicalStore))
    throw Error("worker: --private-store: the worker's store " +
                physicalStore + " and the logical store directory " +
                logicalDir +
                " must be separate folders (neither inside the other); "
                "put the state directory elsewhere");
  try {
    sys.unshareMountNamespace();
    sys.makeRootPrivate();
    sys.makeDirs(physicalStore);
    sys.makeDirs(logicalDir);
    sys.bindMount(physicalStore, logicalDir);
  } catch (const SysError& e) {
    std::string hint =
        e.errNo() == EINVAL
            ? " (unshare must run before the process starts threads)"
            : "";
    throw Error("worker: --private-store could not mount " + physicalStore +
                " on " + logicalDir + ": " + e.what() + hint +
                ". It needs root or CAP_SYS_ADMIN (in a container: mount "
                "rights); otherwise mount the store on " + logicalDir +
                " yourself and use --store-mounted-at-logical, or run the "
                "worker with --store-dir " + physicalStore);
  }
}

}  // namespace kiln::worker
