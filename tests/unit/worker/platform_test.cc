// Platform plugins (docs/worker.md, "Platforms"): `native` and `qemu-user`
// from the build tree, and an aarch64-linux builder (cross-compiled here)
// built on this host in the linux sandbox through qemu-user.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "kiln/common/file.h"
#include "sandbox_fixture.h"
#include "test_support.h"

namespace kiln::worker::sbtest {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

std::string hostSystem() {
  struct utsname u {};
  ::uname(&u);
  return std::string(u.machine) + "-linux";
}

TEST(Platforms, NativeRunsTheHostsSystemAsItIs) {
  auto p = loadTestPlatforms({"native"});
  EXPECT_THAT(p->systems(), Contains(hostSystem()));
  auto cmd = p->command(hostSystem(), "/nix/store/x-b/bin/b", "b");
  ASSERT_TRUE(cmd);
  EXPECT_EQ(cmd->file, "/nix/store/x-b/bin/b");
  EXPECT_EQ(cmd->argv, std::vector<std::string>{"b"});
  EXPECT_TRUE(cmd->hostPaths.empty());
  EXPECT_FALSE(p->command("riscv64-linux", "/b", "b"));
}

// Whether this kernel runs a 32-bit x86 program: a hand-made static i386
// ELF that exits with 42 through int 0x80, independent of the native
// plugin's own probe (and checked against qemu-i386-static when written).
bool hostRuns32BitPrograms() {
  static const unsigned char kExit42[] = {
      0x7f, 0x45, 0x4c, 0x46, 0x01, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00,
      0x54, 0x80, 0x04, 0x08, 0x34, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x34, 0x00, 0x20, 0x00, 0x01, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x80, 0x04, 0x08, 0x00, 0x80, 0x04, 0x08, 0x60, 0x00, 0x00, 0x00,
      0x60, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00,
      0xb8, 0x01, 0x00, 0x00, 0x00, 0xbb, 0x2a, 0x00, 0x00, 0x00, 0xcd, 0x80};
  TempDir dir("kiln-i386");
  std::string path = dir.path() + "/exit42";
  writeFile(path, std::string(reinterpret_cast<const char*>(kExit42), sizeof kExit42));
  ::chmod(path.c_str(), 0755);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(path.c_str(), "exit42", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 42;
}

// `native` announces i686-linux exactly when the host runs 32-bit programs.
TEST(Platforms, NativeAnnouncesI686ExactlyWhenTheHostRuns32BitPrograms) {
  if (hostSystem() != "x86_64-linux") GTEST_SKIP() << "an x86_64 host only";
  auto p = loadTestPlatforms({"native"});
  auto systems = p->systems();
  bool runs = hostRuns32BitPrograms();
  EXPECT_EQ(std::find(systems.begin(), systems.end(), "i686-linux") != systems.end(), runs)
      << "the host " << (runs ? "runs" : "does not run") << " 32-bit programs";
  EXPECT_EQ(p->command("i686-linux", "/nix/store/x-b/bin/b", "b").has_value(), runs);
}

TEST(Platforms, QemuUserRunsOtherCpusUnderTheStaticEmulator) {
  if (!pathExists("/usr/bin/qemu-aarch64-static"))
    GTEST_SKIP() << "qemu-user-static missing (scripts/install-deps.sh)";
  auto p = loadTestPlatforms({"native", "qemu-user"});
  auto systems = p->systems();
  EXPECT_EQ(systems.front(), hostSystem());  // native first
  EXPECT_THAT(systems, Contains("aarch64-linux"));
  auto cmd = p->command("aarch64-linux", "/nix/store/x-b/bin/b", "b");
  ASSERT_TRUE(cmd);
  EXPECT_EQ(cmd->file, "/usr/bin/qemu-aarch64-static");
  EXPECT_EQ(cmd->argv, (std::vector<std::string>{"qemu-aarch64-static", "-0",
                                                 "b", "/nix/store/x-b/bin/b"}));
  EXPECT_EQ(cmd->hostPaths,
            std::vector<std::string>{"/usr/bin/qemu-aarch64-static"});
  // The host's own system stays native's, even though qemu-user is loaded.
  EXPECT_EQ(p->command(hostSystem(), "/b", "b")->file, "/b");
  EXPECT_THAT(loadTestPlatforms({"qemu-user"})->systems(),
              Not(Contains(hostSystem())));
}

class EmulatedBuild : public SandboxTest {
 protected:
  // A derivation for aarch64-linux whose builder is the cross-compiled
  // emulated_builder.c, an input of the build.
  BuildRequest aarch64Request() {
    std::string bin = root_.path() + "/builder-aarch64";
    if (auto why = test::crossCompileAarch64(
            test::sourceDir() + "/tests/support/emulated_builder.c",
            bin);
        !why.empty())
      throw Error(why);
    auto input = addInput("builder-aarch64", readFile(bin));
    ::chmod(physical(input).c_str(), 0555);
    auto r = request("emulated", "");
    r.drv.platform = "aarch64-linux";
    r.drv.env["system"] = "aarch64-linux";
    r.drv.builder = logical(input);
    r.drv.env["builder"] = logical(input);
    r.drv.args = {"one", "two"};
    r.drv.inputSrcs = {input};
    r.inputClosure = {input};
    return r;
  }
};

TEST_F(EmulatedBuild, Aarch64BuilderRunsUnderQemuInsideTheSandbox) {
  if (!pathExists("/usr/bin/qemu-aarch64-static") ||
      !test::haveProgram("aarch64-linux-gnu-gcc"))
    GTEST_SKIP() << "qemu-user-static or gcc-aarch64-linux-gnu missing "
                    "(scripts/install-deps.sh)";
  auto r = aarch64Request();
  if (!pathExists("/proc/sys/fs/binfmt_misc/qemu-aarch64")) {
    // Without a platform (and no binfmt_misc registration) the kernel
    // cannot execute it: qemu-user is what makes it run.
    auto plain = build(r);
    EXPECT_EQ(plain.status, StepStatus::kFailed);
    EXPECT_THAT(plain.errorMsg, HasSubstr("cannot start the builder"));
  }

  platforms_ = loadTestPlatforms({"native", "qemu-user"});
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg << log_;
  auto out = readFile(physical(*r.drv.outputs.at("out").path));
  EXPECT_EQ(out, "machine=aarch64\nargv0=" + baseNameOf(r.drv.builder) +
                     "\narg=one\narg=two\n");
}

}  // namespace
}  // namespace kiln::worker::sbtest
