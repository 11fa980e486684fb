// The `linux` sandbox's system-call filter (plugins/sandbox_linux/
// seccomp_filter.h): a builder cannot set a setuid or setgid bit through
// any of the system calls that can (the 32-bit table included) nor set
// an extended attribute, while ordinary modes still work; the filter can
// be turned off for debugging, and a bad value of the option is refused.
#include <gmock/gmock.h>
#include <sys/xattr.h>

#include "kiln/common/file.h"
#include "sandbox_fixture.h"
#include "test_support.h"

namespace kiln::worker::sbtest {
namespace {

using kiln::StepStatus;

std::string probe(const std::string& label, const std::string& args) {
  return "/probe " + args + "; echo " + label + "=$? >> $out; ";
}

// Every way of setting a setuid or setgid bit, then ordinary modes and an
// extended attribute; `$out` gets one exit code per attempt (0: it worked).
const std::string kAttempts =
    ": > $out; " + probe("chmod-suid", "setid chmod 4755 /build/a") +
    probe("chmod-sgid", "setid chmod 2755 /build/b") +
    probe("fchmod-suid", "setid fchmod 4755 /build/c") +
    probe("fchmodat-suid", "setid fchmodat 4755 /build/d") +
    probe("fchmodat-sgid", "setid fchmodat 2711 /build/e") +
    probe("fchmodat2-suid", "setid fchmodat2 4755 /build/f") +
    probe("plain", "setid chmod 0755 /build/g") +
    probe("plain-fchmod", "setid fchmod 0600 /build/h") +
    probe("xattr", "xattr /build/g");

// Whether the build directory's file system takes user xattrs at all
// (else the xattr attempt proves nothing).
bool hostTakesXattrs(const std::string& dir) {
  std::string f = dir + "/xattr-check";
  writeFile(f, "");
  bool ok = ::setxattr(f.c_str(), "user.kiln", "x", 1, 0) == 0;
  ::unlink(f.c_str());
  return ok;
}

TEST_F(SandboxTest, SetIdBitsAndExtendedAttributesAreRefused) {
  auto res = build(request("setid", kAttempts));
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg << log_;
  std::string out = readFile(res.outputs.at(0).physicalPath);
  EXPECT_EQ(out.substr(0, out.find("xattr=")),
            "chmod-suid=1\nchmod-sgid=1\nfchmod-suid=1\nfchmodat-suid=1\n"
            "fchmodat-sgid=1\nfchmodat2-suid=1\nplain=0\nplain-fchmod=0\n")
      << log_;
  EXPECT_THAT(out, ::testing::HasSubstr("xattr=1\n")) << log_;
  if (hostTakesXattrs(root_.path())) {
    EXPECT_THAT(log_, ::testing::HasSubstr("blocked: xattr /build/g: "
                                           "Operation not supported"));
  }
}

// Without the filter the same attempts work: the filter is what refuses.
TEST_F(SandboxTest, SeccompFalseTurnsTheFilterOff) {
  sandbox_ = loadTestSandbox(
      "linux", {{"extra-paths", sandboxTestPaths()}, {"seccomp", "false"}});
  auto res = build(request("setid-off", kAttempts));
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg << log_;
  std::string out = readFile(res.outputs.at(0).physicalPath);
  EXPECT_THAT(out, ::testing::HasSubstr("chmod-suid=0\nchmod-sgid=0\n"))
      << log_;
  EXPECT_THAT(out, ::testing::HasSubstr("fchmodat-suid=0\n")) << log_;
  EXPECT_THROW(loadTestSandbox("linux", {{"extra-paths", sandboxTestPaths()},
                                         {"seccomp", "maybe"}}),
               Error);
}

// A 32-bit builder (i686 builds on an x86_64 worker) meets the same
// filter through the i386 table: refused, not killed.
TEST_F(SandboxTest, The32BitSystemCallTableIsFilteredToo) {
  std::string probe32 = test::binaryDir() + "/tests/unit/worker/kiln_setid32";
  if (!pathExists(probe32)) GTEST_SKIP() << "no i386 probe on this host";
  sandbox_ = loadTestSandbox(
      "linux", {{"extra-paths", sandboxTestPaths() + " /probe32=" + probe32}});
  auto res = build(request("setid32", "/probe32; echo i386=$? > $out"));
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg << log_;
  std::string out = readFile(res.outputs.at(0).physicalPath);
  if (out == "i386=126\n" || out == "i386=127\n")
    GTEST_SKIP() << "this kernel runs no 32-bit programs";
  EXPECT_EQ(out, "i386=1\n") << log_;  // 0: escaped; 159: killed (SIGSYS)
}

}  // namespace
}  // namespace kiln::worker::sbtest
