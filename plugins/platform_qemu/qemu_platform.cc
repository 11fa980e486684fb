// The `qemu-user` platform: builders of other CPUs run under Debian's
// qemu-user-static emulators, which the platform names as the program to
// execute (the builder becomes the emulator's argument), so no binfmt_misc
// registration is needed and a sandbox only has to show the one static
// emulator file (docs/worker.md, "Platforms").
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "kiln/plugin/plugin.hpp"

namespace {

using kiln::plugin::Failure;

// qemu's name for a CPU and the Nix system it runs.
struct Emulated {
  const char* qemuArch;
  const char* system;
};
const Emulated kEmulated[] = {{"aarch64", "aarch64-linux"},
                              {"riscv64", "riscv64-linux"},
                              {"arm", "armv7l-linux"},
                              {"ppc64le", "powerpc64le-linux"},
                              {"s390x", "s390x-linux"},
                              {"mips64el", "mips64el-linux"},
                              {"loongarch64", "loongarch64-linux"},
                              {"i386", "i686-linux"},
                              {"x86_64", "x86_64-linux"}};

bool isExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

class QemuPlatform {
 public:
  explicit QemuPlatform(kiln::plugin::Host host) : host_(host) {
    std::string dir = host.config("qemu-dir").value_or("/usr/bin");
    struct utsname u {};
    if (::uname(&u) < 0) throw Failure::sys("uname");
    std::string machine = u.machine;
    for (auto& e : kEmulated) {
      if (machine == e.qemuArch) continue;  // the native platform's
      std::string path = dir + "/qemu-" + e.qemuArch + "-static";
      if (isExecutableFile(path)) emulators_.push_back({e.system, path});
    }
    if (emulators_.empty())
      host.log(KILN_LOG_INFO, "no qemu-*-static in " + dir +
                                  " (Debian's qemu-user-static): no "
                                  "emulated systems");
  }

  std::vector<std::string> systems() {
    std::vector<std::string> out;
    for (auto& e : emulators_) out.push_back(e.system);
    return out;
  }

  std::vector<std::string> command(const std::string& system,
                                   const std::string& program,
                                   const std::string& argv0) {
    for (auto& e : emulators_)
      if (e.system == system) {
        std::string base = e.path.substr(e.path.rfind('/') + 1);
        host_.metricAdd("builds_total", 1);  // the worker's /metrics
        // -0 sets the emulated program's argument 0.
        return {e.path, base, "-0", argv0, program};
      }
    throw Failure(KILN_ERR_UNSUPPORTED, "no qemu-user emulator for " + system);
  }

 private:
  struct Emulator {
    std::string system, path;
  };
  kiln::plugin::Host host_;
  std::vector<Emulator> emulators_;
};

}  // namespace

KILN_PLATFORM_PLUGIN(QemuPlatform, "qemu-user", "1.0.0",
                     "other CPUs (aarch64-linux, riscv64-linux, ...) under "
                     "qemu-user-static, no binfmt registration")
