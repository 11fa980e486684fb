#pragma once
// The linux sandbox's system-call filter (seccomp, made with libseccomp):
// what Nix's build sandbox filters, for every system-call table the host
// runs (on x86_64 also the i386 and x32 ones, so a 32-bit builder cannot
// go around it). Made once by the worker's process; the sandbox's child
// only installs it (it may not allocate, see sandbox_child.h).

#include <linux/filter.h>

#include <vector>

namespace kiln::sandbox_linux {

/// A compiled filter, ready for prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER).
/// Refused (with errno):
/// - chmod, fchmod, fchmodat and fchmodat2 setting the setuid or setgid
///   bit: EPERM (a build must not make a setuid program for the store);
/// - setxattr, lsetxattr and fsetxattr, which set extended attributes
///   and ACLs: ENOTSUP (a NAR cannot hold them).
/// Everything else is allowed.
class SeccompFilter {
 public:
  /// Compiles the filter. Throws kiln::plugin::Failure if libseccomp
  /// refuses (an architecture it does not know).
  SeccompFilter();
  SeccompFilter(const SeccompFilter&) = delete;
  SeccompFilter& operator=(const SeccompFilter&) = delete;
  /// The program; valid while this object lives.
  const sock_fprog* program() const { return &prog_; }
  /// The system-call tables (AUDIT_ARCH_*) the filter covers.
  const std::vector<unsigned>& architectures() const { return arches_; }

 private:
  std::vector<sock_filter> code_;
  sock_fprog prog_{};
  std::vector<unsigned> arches_;
};

}  // namespace kiln::sandbox_linux
