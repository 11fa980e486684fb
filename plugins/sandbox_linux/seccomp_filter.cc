#include "seccomp_filter.h"

#include <seccomp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "kiln/plugin/plugin.hpp"

namespace kiln::sandbox_linux {
namespace {

using plugin::Failure;

using Context = std::unique_ptr<void, decltype(&seccomp_release)>;

void check(int rc, const std::string& what) {
  if (rc < 0)
    throw Failure(KILN_ERR_FAILED, "building the system-call filter: " + what +
                                       ": " + std::strerror(-rc));
}

// The number of `name` for libseccomp; `fallback` (the generic number)
// when this libseccomp is older than the system call.
int syscallNumber(const char* name, int fallback) {
  int nr = seccomp_syscall_resolve_name(name);
  return nr == __NR_SCMP_ERROR ? fallback : nr;
}

// Refuses `syscall` with EPERM when its argument `arg` (the mode) has the
// setuid or the setgid bit.
void refuseSetId(scmp_filter_ctx ctx, int syscall, unsigned arg,
                 const char* name) {
  for (mode_t bit : {mode_t(S_ISUID), mode_t(S_ISGID)}) {
    scmp_arg_cmp cmp = {arg, SCMP_CMP_MASKED_EQ, bit, bit};
    check(seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), syscall, 1, &cmp),
          name);
  }
}

// The extra system-call tables of this host's processes.
std::vector<uint32_t> compatArchitectures() {
  switch (seccomp_arch_native()) {
    case SCMP_ARCH_X86_64:
      return {SCMP_ARCH_X86, SCMP_ARCH_X32};
    case SCMP_ARCH_AARCH64:
      return {SCMP_ARCH_ARM};
    default:
      return {};
  }
}

// Copies the compiled program out of libseccomp (2.5 has no in-memory
// export: through a memfd).
std::vector<sock_filter> exportProgram(scmp_filter_ctx ctx) {
  int fd = ::memfd_create("kiln-seccomp", MFD_CLOEXEC);
  if (fd < 0) throw Failure::sys("memfd_create for the system-call filter");
  std::unique_ptr<int, void (*)(int*)> closer(&fd, [](int* f) { ::close(*f); });
  check(seccomp_export_bpf(ctx, fd), "exporting it");
  off_t size = ::lseek(fd, 0, SEEK_END);
  if (size <= 0 || size % sizeof(sock_filter) != 0)
    throw Failure(KILN_ERR_FAILED, "the exported system-call filter is empty");
  std::vector<sock_filter> code(size_t(size) / sizeof(sock_filter));
  if (::pread(fd, code.data(), size_t(size), 0) != size)
    throw Failure::sys("reading the exported system-call filter");
  return code;
}

}  // namespace

SeccompFilter::SeccompFilter() {
  Context ctx(seccomp_init(SCMP_ACT_ALLOW), &seccomp_release);
  if (!ctx) throw Failure(KILN_ERR_FAILED, "seccomp_init failed");
  arches_.push_back(seccomp_arch_native());
  for (uint32_t arch : compatArchitectures()) {
    check(seccomp_arch_add(ctx.get(), arch), "adding a 32-bit table");
    arches_.push_back(arch);
  }
  refuseSetId(ctx.get(), SCMP_SYS(chmod), 1, "chmod");
  refuseSetId(ctx.get(), SCMP_SYS(fchmod), 1, "fchmod");
  refuseSetId(ctx.get(), SCMP_SYS(fchmodat), 2, "fchmodat");
  refuseSetId(ctx.get(), syscallNumber("fchmodat2", 452), 2, "fchmodat2");
  for (int nr : {SCMP_SYS(setxattr), SCMP_SYS(lsetxattr), SCMP_SYS(fsetxattr)})
    check(seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOTSUP), nr, 0),
          "setxattr");
  code_ = exportProgram(ctx.get());
  prog_.len = static_cast<unsigned short>(code_.size());
  prog_.filter = code_.data();
}

}  // namespace kiln::sandbox_linux
