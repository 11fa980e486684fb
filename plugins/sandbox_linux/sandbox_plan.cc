#include "sandbox_plan.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <climits>
#include <sstream>

#include "kiln/plugin/plugin.hpp"

namespace kiln::sandbox_linux {
namespace {

using plugin::Failure;

// As in Nix 2.8's sandbox: the build user is nixbld (1000) in group 100.
const char* kPasswd =
    "root:x:0:0:Nix build user:/build:/noshell\n"
    "nixbld:x:1000:100:Nix build user:/build:/noshell\n"
    "nobody:x:65534:65534:Nobody:/:/noshell\n";
const char* kGroup = "root:x:0:\nnixbld:!:100:\nnogroup:x:65534:\n";
const char* kHosts = "127.0.0.1 localhost\n::1 localhost\n";

/// The flags a read-only remount of a bind of `path` must keep (the kernel
/// refuses to clear locked nosuid/nodev/noexec/atime flags in a user
/// namespace), plus nosuid and nodev.
unsigned long keptFlags(const std::string& path) {
  struct statvfs st;
  unsigned long flags = MS_NOSUID | MS_NODEV;
  if (::statvfs(path.c_str(), &st) < 0) return flags;
  if (st.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (st.f_flag & ST_NOATIME) flags |= MS_NOATIME;
  if (st.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (st.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  return flags;
}

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

}  // namespace

std::vector<ExtraPath> parseExtraPaths(const std::string& text) {
  std::vector<ExtraPath> out;
  std::istringstream in(text);
  for (std::string item; in >> item;) {
    ExtraPath e;
    if (item.back() == '?') {
      e.optional = true;
      item.pop_back();
    }
    auto eq = item.find('=');
    e.target = item.substr(0, eq);
    e.source = eq == std::string::npos ? e.target : item.substr(eq + 1);
    if (e.target.empty() || e.target[0] != '/' || e.source.empty() ||
        e.source[0] != '/' || e.target.find("/..") != std::string::npos)
      throw Failure(KILN_ERR_INVALID,
                    "extra sandbox path '" + item +
                        "': want /target=/source or /path (absolute)");
    out.push_back(std::move(e));
  }
  return out;
}

const char* SandboxPlan::keep(std::string s) {
  strings_.push_back(std::move(s));
  return strings_.back().c_str();
}

void SandboxPlan::bind(const std::string& source, const std::string& target,
                       bool readOnly) {
  MountOp op;
  op.source = keep(source);
  op.target = keep(root_.host(target));
  op.flags = MS_BIND | MS_REC;
  op.readOnly = readOnly;
  if (readOnly) op.readOnlyFlags = keptFlags(source);
  binds_[target] = op;
}

SandboxPlan::SandboxPlan(const kiln_sandbox_spec& spec, RootDir& root,
                         const std::vector<ExtraPath>& extra, gid_t buildGid)
    : root_(root) {
  addSelfBinds(spec, buildGid);
  root_.makeDir("/build", 0700);
  bind(spec.host_build_dir, "/build", false);
  root_.makeDir("/tmp", 01777);
  addEtc(spec.network != 0);
  root_.makeDir("/proc", 0555);
  special_.push_back({"none", keep(root_.host("/proc")), "proc", 0, nullptr});
  addDev();
  addInputs(spec);
  addExtra(extra);
  addExtra(specExtraPaths(spec));
  for (auto& [inside, op] : binds_) mounts_.push_back(op);
  mounts_.insert(mounts_.end(), special_.begin(), special_.end());
}

void SandboxPlan::addSelfBinds(const kiln_sandbox_spec& spec, gid_t buildGid) {
  // The root and the store directory are mount points of their own (needed
  // by pivot_root; Nix 2.8 shows both in /proc/mounts).
  std::string store = spec.logical_store;
  root_.makeDir(store, 01775);
  if (::geteuid() == 0 && ::chown(root_.host(store).c_str(), 0, buildGid) < 0)
    throw Failure::sys("chown " + root_.host(store));
  const char* r = keep(root_.path());
  mounts_.push_back({r, r, nullptr, MS_BIND, nullptr});
  const char* s = keep(root_.host(store));
  mounts_.push_back({s, s, nullptr, MS_BIND, nullptr});
}

void SandboxPlan::addEtc(bool network) {
  root_.makeDir("/etc");
  root_.writeFile("/etc/passwd", kPasswd);
  root_.writeFile("/etc/group", kGroup);
  if (!network) {
    root_.writeFile("/etc/hosts", kHosts);
    return;
  }
  // A fixed-output build may use the network: it gets the host's name
  // service files (as in Nix).
  for (const char* f : {"/etc/resolv.conf", "/etc/services", "/etc/hosts"})
    if (exists(f) && root_.makeMountPoint(f, f)) bind(f, f, true);
}

void SandboxPlan::addDev() {
  root_.makeDir("/dev");
  for (const char* d : {"/dev/full", "/dev/null", "/dev/random", "/dev/tty",
                        "/dev/urandom", "/dev/zero"})
    if (root_.makeMountPoint(d, d)) bind(d, d, false);
  // Nix 2.8 also shows /dev/kvm when its `kvm` system feature is on, which
  // by default it is when the device is usable (read and write).
  if (::access("/dev/kvm", R_OK | W_OK) == 0 &&
      root_.makeMountPoint("/dev/kvm", "/dev/kvm"))
    bind("/dev/kvm", "/dev/kvm", false);
  root_.makeDir("/dev/shm", 01777);
  special_.push_back(
      {"none", keep(root_.host("/dev/shm")), "tmpfs", 0, "size=50%"});
  if (exists("/dev/pts/ptmx")) {
    root_.makeDir("/dev/pts");
    MountOp pts{"none", keep(root_.host("/dev/pts")), "devpts", 0,
                "newinstance,mode=0620"};
    pts.chmodTarget = keep(root_.host("/dev/pts/ptmx"));
    special_.push_back(pts);
    root_.makeSymlink("/dev/pts/ptmx", "/dev/ptmx");
  }
  root_.makeSymlink("/proc/self/fd", "/dev/fd");
  root_.makeSymlink("/proc/self/fd/0", "/dev/stdin");
  root_.makeSymlink("/proc/self/fd/1", "/dev/stdout");
  root_.makeSymlink("/proc/self/fd/2", "/dev/stderr");
}

void SandboxPlan::addInputs(const kiln_sandbox_spec& spec) {
  std::string store = spec.logical_store;
  std::string physical = spec.physical_store;
  unsigned long flags = keptFlags(physical);
  for (auto* in = spec.inputs; in && *in; ++in) {
    std::string src = physical + "/" + *in, dst = store + "/" + *in;
    struct stat st;
    if (::lstat(src.c_str(), &st) < 0)
      throw Failure::sys("input " + src + " of the build");
    if (S_ISLNK(st.st_mode)) {  // mount would follow it: copy the link
      char target[PATH_MAX];
      ssize_t n = ::readlink(src.c_str(), target, sizeof target - 1);
      if (n < 0) throw Failure::sys("readlink " + src);
      root_.makeSymlink(std::string(target, n), dst);
      continue;
    }
    root_.makeMountPoint(src, dst);
    MountOp op{keep(src), keep(root_.host(dst)), nullptr, MS_BIND | MS_REC,
               nullptr};
    op.readOnly = true;
    op.readOnlyFlags = flags;
    binds_[dst] = op;
  }
}

std::vector<ExtraPath> SandboxPlan::specExtraPaths(
    const kiln_sandbox_spec& spec) {
  std::vector<ExtraPath> out;
  if (spec.size < offsetof(kiln_sandbox_spec, extra_paths) + sizeof(void*) ||
      !spec.extra_paths)
    return out;  // a host of minor 0 or 1
  for (auto p = spec.extra_paths; *p; ++p) {
    if (**p != '/')
      throw Failure(KILN_ERR_INVALID,
                    std::string("extra path not absolute: ") + *p);
    if (!binds_.count(*p)) out.push_back({*p, *p, false});
  }
  return out;
}

void SandboxPlan::addExtra(const std::vector<ExtraPath>& extra) {
  for (auto& e : extra) {
    if (!root_.makeMountPoint(e.source, e.target)) {
      if (e.optional) continue;
      throw Failure(KILN_ERR_INVALID, "extra sandbox path " + e.source +
                                          " does not exist on this host");
    }
    bind(e.source, e.target, true);
  }
}

}  // namespace kiln::sandbox_linux
