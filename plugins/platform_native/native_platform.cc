// The `native` platform: builders of the host's own system run as they
// are; `i686-linux` too when this x86_64 kernel runs 32-bit programs, which
// is probed by executing a tiny static i386 program (docs/worker.md,
// "Platforms").
#include <sys/mman.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "kiln/common/spawner.h"
#include "kiln/plugin/plugin.hpp"

namespace {

using kiln::ProcessSpawner;
using kiln::SpawnOptions;
using kiln::systemSpawner;
using kiln::plugin::Failure;

// A static i386 ELF executable doing exit(0) through int 0x80: the ELF
// header (52 bytes), one PT_LOAD program header (32 bytes) mapping the file
// at 0x08048000, and 9 bytes of code at 0x08048054.
// clang-format off
const unsigned char kI386Exit0[] = {
    // e_ident: magic, 32-bit, little-endian, version 1, System V
    0x7f, 'E', 'L', 'F', 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    2, 0, 3, 0,              // e_type EXEC, e_machine 386
    1, 0, 0, 0,              // e_version
    0x54, 0x80, 0x04, 0x08,  // e_entry
    52, 0, 0, 0,             // e_phoff
    0, 0, 0, 0,              // e_shoff
    0, 0, 0, 0,              // e_flags
    52, 0, 32, 0, 1, 0,      // e_ehsize, e_phentsize, e_phnum
    0, 0, 0, 0, 0, 0,        // e_shentsize, e_shnum, e_shstrndx
    1, 0, 0, 0,              // p_type LOAD
    0, 0, 0, 0,              // p_offset
    0x00, 0x80, 0x04, 0x08,  // p_vaddr
    0x00, 0x80, 0x04, 0x08,  // p_paddr
    93, 0, 0, 0,             // p_filesz
    93, 0, 0, 0,             // p_memsz
    5, 0, 0, 0,              // p_flags R+X
    0, 0x10, 0, 0,           // p_align
    0xb8, 1, 0, 0, 0,        // mov eax, 1 (exit)
    0x31, 0xdb,              // xor ebx, ebx
    0xcd, 0x80};             // int 0x80
// clang-format on

// The probe's child: executes the memfd `*arg` (ProcessSpawner's entry).
int execProbe(void* arg) {
  char* const argv[] = {const_cast<char*>("kiln-i686-probe"), nullptr};
  char* const envp[] = {nullptr};
  ::fexecve(*static_cast<int*>(arg), argv, envp);
  return 127;
}

// Whether the kernel runs 32-bit x86 programs: executes kI386Exit0 from a
// memfd (no file system, so a noexec /tmp does not matter).
bool runsI386(ProcessSpawner& spawner) {
  int fd = ::memfd_create("kiln-i686-probe", MFD_CLOEXEC);
  if (fd < 0) return false;
  bool written = ::write(fd, kI386Exit0, sizeof kI386Exit0) ==
                 static_cast<ssize_t>(sizeof kI386Exit0);
  pid_t pid = written ? spawner.spawn(execProbe, &fd, SpawnOptions{}) : -1;
  ::close(fd);
  if (pid < 0) return false;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The Nix system of this machine's CPU ("x86_64-linux"), or "" if unknown.
std::string hostSystem() {
  struct utsname u {};
  if (::uname(&u) < 0) return "";
  std::string m = u.machine;
  if (m == "i386" || m == "i486" || m == "i586") m = "i686";
  if (m == "armv8l") m = "armv7l";
  return m + "-linux";
}

class NativePlatform {
 public:
  explicit NativePlatform(kiln::plugin::Host host) : host_(host) {
    std::string own = hostSystem();
    if (own.empty()) throw Failure::sys("uname");
    systems_.push_back(own);
    if (own == "x86_64-linux") {
      if (runsI386(systemSpawner()))
        systems_.push_back("i686-linux");
      else
        host.log(KILN_LOG_INFO,
                 "this kernel does not run 32-bit x86 programs: no "
                 "i686-linux");
    }
  }

  std::vector<std::string> systems() { return systems_; }

  std::vector<std::string> command(const std::string& system,
                                   const std::string& program,
                                   const std::string& argv0) {
    if (std::find(systems_.begin(), systems_.end(), system) == systems_.end())
      throw Failure(KILN_ERR_UNSUPPORTED,
                    "the native platform does not run " + system);
    host_.metricAdd("builds_total", 1);  // the worker's /metrics
    return {program, argv0};
  }

 private:
  kiln::plugin::Host host_;
  std::vector<std::string> systems_;
};

}  // namespace

KILN_PLATFORM_PLUGIN(NativePlatform, "native", "1.0.0",
                     "the host's own systems (x86_64-linux, and i686-linux "
                     "when the kernel runs 32-bit programs)")
