// The process spawner: the real system calls (fork, clone's argument
// checks, posix_spawn with file actions and a process group of its own),
// and `Process` over a fake spawner that refuses to start a child.
#include "kiln/common/spawner.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "fake_spawner.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/process.h"

namespace kiln {
namespace {

using std::chrono::seconds;

int waitStatus(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

size_t openDescriptors() {
  size_t n = 0;
  for (auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

int exitWithArg(void* arg) { return *static_cast<int*>(arg); }

TEST(SystemSpawner, ForkRunsTheEntryAndExitsWithItsValue) {
  int code = 7;
  pid_t pid = systemSpawner().spawn(exitWithArg, &code, SpawnOptions{});
  ASSERT_GT(pid, 0);
  int status = waitStatus(pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
}

TEST(SystemSpawner, CloneWithoutAStackIsRefused) {
  SpawnOptions options;
  options.cloneFlags = CLONE_NEWUTS;
  int code = 0;
  errno = 0;
  EXPECT_EQ(systemSpawner().spawn(exitWithArg, &code, options), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST(SystemSpawner, ProgramWithFileActionsAndItsOwnProcessGroup) {
  TempDir dir("kiln-spawner");
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  AutoCloseFD readEnd(p[0]), writeEnd(p[1]);
  const char* argv[] = {"sh", "-c", "pwd; cut -d' ' -f5 /proc/$$/stat",
                        nullptr};
  const char* envp[] = {"PATH=/usr/bin:/bin", nullptr};
  ProgramSpec spec;
  spec.program = "sh";
  spec.searchPath = true;
  spec.argv = const_cast<char* const*>(argv);
  spec.envp = const_cast<char* const*>(envp);
  spec.newProcessGroup = true;
  spec.actions = {{FileAction::Kind::kDup2, 1, writeEnd.get()},
                  {FileAction::Kind::kChdir, -1, -1, dir.path().c_str()}};
  pid_t pid = -1;
  ASSERT_EQ(systemSpawner().spawnProgram(spec, &pid), 0);
  writeEnd.reset();
  std::string out;
  char buf[256];
  for (ssize_t n; (n = ::read(readEnd.get(), buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  EXPECT_EQ(waitStatus(pid), 0);
  std::string pgid = out.substr(out.find('\n') + 1);
  EXPECT_EQ(out.substr(0, out.find('\n')),
            std::filesystem::canonical(dir.path()).string());
  EXPECT_EQ(std::stoi(pgid), pid);
}

TEST(SystemSpawner, AMissingProgramIsAnErrno) {
  const char* argv[] = {"kiln-no-such-program", nullptr};
  const char* envp[] = {nullptr};
  ProgramSpec spec;
  spec.program = "/nonexistent/kiln-no-such-program";
  spec.argv = const_cast<char* const*>(argv);
  spec.envp = const_cast<char* const*>(envp);
  pid_t pid = -1;
  EXPECT_EQ(systemSpawner().spawnProgram(spec, &pid), ENOENT);
  spec.envp = nullptr;
  EXPECT_EQ(systemSpawner().spawnProgram(spec, &pid), EINVAL);
}

ProcessSpec echo(const std::string& text) {
  ProcessSpec spec;
  spec.program = "/bin/echo";
  spec.args = {"echo", text};
  return spec;
}

// A full process table (fork's EAGAIN) is the caller's SysError, and the
// pipes opened for the child are closed again.
TEST(ProcessOverFakeSpawner, AFailedForkThrowsAndLeaksNoDescriptor) {
  testing::FakeSpawner spawner;
  spawner.failNext({EAGAIN});
  size_t before = openDescriptors();
  try {
    Process p(echo("never"), spawner);
    FAIL() << "no error";
  } catch (const SysError& e) {
    EXPECT_EQ(e.errNo(), EAGAIN);
    EXPECT_NE(std::string(e.what()).find("fork for '/bin/echo'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(openDescriptors(), before);
  auto calls = spawner.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_FALSE(calls[0].program);
  EXPECT_EQ(calls[0].cloneFlags, 0);
  EXPECT_EQ(calls[0].failedWith, EAGAIN);
}

TEST(ProcessOverFakeSpawner, TheLauncherStartsThroughItsSpawner) {
  testing::FakeSpawner spawner;
  RealProcessLauncher launcher(spawner);
  auto child = launcher.start(echo("hi"));
  std::string out;
  EXPECT_EQ(waitForExit(*child, seconds(10), &out), 0);
  EXPECT_EQ(out, "hi\n");
  ASSERT_EQ(spawner.calls().size(), 1u);
  EXPECT_EQ(spawner.calls()[0].failedWith, 0);
}

}  // namespace
}  // namespace kiln
