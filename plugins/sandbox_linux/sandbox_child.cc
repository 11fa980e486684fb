#include "sandbox_child.h"

#include <linux/capability.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kiln::sandbox_linux {
namespace {

namespace ps = plugin_support;

[[noreturn]] void fail(const ChildPlan& p, int step) {
  ps::childFail(p.exec.statusWrite, ps::kStageSandbox + step);
}

void doMounts(const ChildPlan& p) {
  for (size_t i = 0; i < p.mountCount; ++i) {
    const MountOp& m = p.mounts[i];
    if (::mount(m.source, m.target, m.fstype, m.flags, m.data) < 0)
      fail(p, kStepMount);
    if (m.readOnly &&
        ::mount(nullptr, m.target, nullptr,
                MS_BIND | MS_REMOUNT | MS_RDONLY | m.readOnlyFlags,
                nullptr) < 0)
      fail(p, kStepMount);
    if (m.chmodTarget) ::chmod(m.chmodTarget, 0666);
  }
}

void bringUpLoopback(const ChildPlan& p) {
  int fd = ::socket(PF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_IP);
  if (fd < 0) fail(p, kStepLoopback);
  struct ifreq ifr;
  std::memset(&ifr, 0, sizeof ifr);
  std::strcpy(ifr.ifr_name, "lo");
  ifr.ifr_flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING;
  if (::ioctl(fd, SIOCSIFFLAGS, &ifr) < 0) fail(p, kStepLoopback);
  ::close(fd);
}

/// Empties the bounding set (needs CAP_SETPCAP: before the uid change).
void dropBoundingSet(const ChildPlan& p) {
  for (int cap = 0; cap <= 63; ++cap)
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
      fail(p, kStepCapabilities);
}

/// No capability survives: ambient set emptied, no way to gain privileges
/// through exec, and the current sets cleared.
void dropCapabilities(const ChildPlan& p) {
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
      errno != EINVAL)
    fail(p, kStepCapabilities);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) fail(p, kStepCapabilities);
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  std::memset(data, 0, sizeof data);
  if (::syscall(SYS_capset, &hdr, data) < 0) fail(p, kStepCapabilities);
}

/// Raw system calls: glibc's wrappers would try to change the ids of every
/// thread the parent had (its setxid broadcast) and wait for them forever;
/// this child has one thread.
void becomeBuildUser(const ChildPlan& p) {
  if (p.dropGroups && ::syscall(SYS_setgroups, 0, nullptr) < 0)
    fail(p, kStepIdentity);
  if (::syscall(SYS_setresgid, p.gid, p.gid, p.gid) < 0) fail(p, kStepIdentity);
  if (::syscall(SYS_setresuid, p.uid, p.uid, p.uid) < 0) fail(p, kStepIdentity);
}

}  // namespace

const char* stepName(int step) {
  switch (step) {
    case kStepSync:
      return "waiting for the user namespace's id maps";
    case kStepPrivate:
      return "making the mounts private";
    case kStepMount:
      return "mounting the sandbox's file systems";
    case kStepPivot:
      return "entering the new root (pivot_root)";
    case kStepHostname:
      return "setting the host name";
    case kStepLoopback:
      return "bringing up the loopback interface";
    case kStepIdentity:
      return "switching to the build user";
    case kStepCapabilities:
      return "dropping capabilities";
    case kStepParent:
      return "the worker went away";
    case kStepSeccomp:
      return "installing the system-call filter (seccomp)";
    default:
      return "an unknown step";
  }
}

int childMain(void* arg) {
  const ChildPlan& p = *static_cast<const ChildPlan*>(arg);
  char byte;
  if (::read(p.syncRead, &byte, 1) != 1) fail(p, kStepSync);
  if (::setsid() < 0) ps::childFail(p.exec.statusWrite, ps::kStageSession);
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0)
    fail(p, kStepPrivate);
  doMounts(p);
  if (::chdir(p.root) < 0 || ::syscall(SYS_pivot_root, ".", ".") < 0 ||
      ::umount2(".", MNT_DETACH) < 0 || ::chdir("/") < 0)
    fail(p, kStepPivot);
  if (::sethostname("localhost", 9) < 0 || ::setdomainname("(none)", 6) < 0)
    fail(p, kStepHostname);
  if (p.ownNetwork) bringUpLoopback(p);
  dropBoundingSet(p);
  becomeBuildUser(p);
  dropCapabilities(p);
  // Set after the uid change (which clears it); then make sure the worker
  // did not die before: its end of the status pipe would be gone.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) fail(p, kStepParent);
  struct pollfd pfd = {p.exec.statusWrite, POLLOUT, 0};
  if (::poll(&pfd, 1, 0) < 0 || (pfd.revents & POLLERR)) fail(p, kStepParent);
  // Last: from here on the builder's system calls are filtered
  // (no_new_privs, which the kernel requires for it, is set above).
  if (p.seccomp &&
      ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, p.seccomp, 0, 0) < 0)
    fail(p, kStepSeccomp);
  ps::execBuilder(p.exec);
}

}  // namespace kiln::sandbox_linux
