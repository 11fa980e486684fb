#include "kiln/common/process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kiln/common/clock.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "scripted_launcher.h"
#include "test_support.h"

namespace kiln {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

ProcessSpec shell(const std::string& script) {
  ProcessSpec spec;
  spec.program = "/bin/sh";
  spec.args = {"sh", "-c", script};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  return spec;
}

/// Runs to completion (10 s at most) and returns {status, output}.
std::pair<int, std::string> runAll(const ProcessSpec& spec) {
  Process p(spec);
  std::string out;
  auto st = waitForExit(p, seconds(10), &out);
  EXPECT_TRUE(st.has_value());
  return {st.value_or(-1), out};
}

TEST(Process, EnvironmentIsExactlyTheGivenOne) {
  ProcessSpec spec;
  spec.program = "/usr/bin/env";
  spec.env = {{"A", "1"}, {"B", "two words"}, {"EMPTY", ""}};
  auto [st, out] = runAll(spec);
  EXPECT_EQ(describeWaitStatus(st), "exited with code 0");
  EXPECT_EQ(out, "A=1\nB=two words\nEMPTY=\n");
}

TEST(Process, ArgsWorkDirUmaskAndMergedOutput) {
  TempDir dir("proc-test");
  auto spec = shell("pwd; echo \"$0 $1\"; echo err >&2; umask; exit 3");
  spec.args.push_back("zero");
  spec.args.push_back("first");
  spec.workDir = dir.path();
  spec.umask = 027;
  auto [st, out] = runAll(spec);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 3);
  EXPECT_EQ(out, dir.path() + "\nzero first\nerr\n0027\n");
  EXPECT_EQ(describeWaitStatus(st), "exited with code 3");
}

TEST(Process, StdinIsDevNullAndOwnSession) {
  auto [st, out] = runAll(shell("cat; ps -o sid= -o pgid= -p $$"));
  EXPECT_EQ(st, 0);
  // Session and process group ids equal the child's own pid.
  Process p(shell("ps -o pid= -o sid= -o pgid= -p $$"));
  std::string text;
  ASSERT_TRUE(waitForExit(p, seconds(10), &text));
  auto pid = std::to_string(p.pid());
  EXPECT_EQ(text.find(pid), text.find_first_not_of(' '));
  size_t count = 0;
  for (size_t i = text.find(pid); i != std::string::npos;
       i = text.find(pid, i + 1))
    ++count;
  EXPECT_EQ(count, 3u) << text;
}

TEST(Process, StdinReadsTheInputFileAndExitReportsPeakRss) {
  TempDir dir("proc-test");
  writeFile(dir.path() + "/in", "line one\nline two\n");
  auto spec = shell("wc -l; cat >&2");
  spec.inputFile = dir.path() + "/in";
  spec.separateStderr = true;
  Process p(spec);
  std::string out, err;
  size_t peakRss = 0;
  for (;;) {
    auto ev = p.next(seconds(10));
    ASSERT_NE(ev.kind, ProcessEvent::Kind::kIdle);
    if (ev.kind == ProcessEvent::Kind::kExited) {
      peakRss = ev.peakRssBytes;
      break;
    }
    (ev.stream == 2 ? err : out) += ev.data;
  }
  EXPECT_GT(peakRss, 0u);  // a shell takes some memory
  EXPECT_EQ(out, "2\n");
  EXPECT_EQ(err, "");  // wc read everything
  spec.inputFile = dir.path() + "/missing";
  EXPECT_THROW(Process q(spec), SysError);
}

TEST(Process, MissingProgramAndBadWorkDirThrow) {
  ProcessSpec spec;
  spec.program = "/nonexistent/kiln-builder";
  try {
    Process p(spec);
    FAIL() << "no error";
  } catch (const SysError& e) {
    EXPECT_NE(
        std::string(e.what()).find("executing '/nonexistent/kiln-builder'"),
        std::string::npos);
    EXPECT_EQ(e.errNo(), ENOENT);
  }
  auto bad = shell("true");
  bad.workDir = "/nonexistent/dir";
  try {
    Process p(bad);
    FAIL() << "no error";
  } catch (const SysError& e) {
    EXPECT_NE(
        std::string(e.what()).find("working directory '/nonexistent/dir'"),
        std::string::npos);
  }
  auto badEnv = shell("true");
  badEnv.env["A=B"] = "x";
  EXPECT_THROW(Process p(badEnv), Error);
}

TEST(Process, SignalDeathIsDescribed) {
  auto [st, out] = runAll(shell("kill -TERM $$"));
  EXPECT_EQ(describeWaitStatus(st), "killed by signal 15 (SIGTERM)");
}

/// Reads the first line of output (a pid printed by the script).
pid_t readPid(ChildProcess& p) {
  std::string out;
  EXPECT_TRUE(test::pollUntil(
      [&] {
        auto ev = p.next(milliseconds(50));
        if (ev.kind == ProcessEvent::Kind::kOutput) out += ev.data;
        return out.find('\n') != std::string::npos;
      },
      seconds(10)));
  return static_cast<pid_t>(std::stol(out));
}

TEST(Process, KillTreeKillsGrandchildren) {
  Process p(shell("sleep 1000 & echo $!; wait"));
  pid_t grandchild = readPid(p);
  ASSERT_TRUE(processAlive(grandchild));
  EXPECT_FALSE(waitForExit(p, milliseconds(50)).has_value());
  p.killTree();
  auto st = waitForExit(p, seconds(10));
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(describeWaitStatus(*st), "killed by signal 9 (SIGKILL)");
  EXPECT_TRUE(
      test::pollUntil([&] { return !processAlive(grandchild); }, seconds(10)));
}

TEST(Process, StragglersDieWhenTheLeaderExits) {
  Process p(shell("sleep 1000 & echo $!"));
  pid_t grandchild = readPid(p);
  auto start = std::chrono::steady_clock::now();
  auto st = waitForExit(p, seconds(10));
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(*st, 0);
  // The sleeper held the pipe open; it was killed, so no drain grace.
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(1));
  EXPECT_TRUE(
      test::pollUntil([&] { return !processAlive(grandchild); }, seconds(10)));
}

TEST(Process, DestructorKillsTheTree) {
  pid_t grandchild;
  {
    Process p(shell("sleep 1000 & echo $!; wait"));
    grandchild = readPid(p);
  }
  EXPECT_TRUE(
      test::pollUntil([&] { return !processAlive(grandchild); }, seconds(10)));
}

TEST(Process, EscapedDescendantHoldingThePipeIsBoundedByDrainGrace) {
  // setsid leaves the group; the pipe stays open until we give up on it.
  TempDir dir("proc-test");
  // The parent prints the pid only once the escapee runs in its own session.
  Process p(shell("f=" + dir.path() + "/pid; setsid sh -c 'echo $$ > " +
                  "$0.tmp; mv $0.tmp $0; exec sleep 1000' $f & " +
                  "while [ ! -e $f ]; do :; done; cat $f"));
  pid_t escaped = readPid(p);
  auto start = std::chrono::steady_clock::now();
  auto st = waitForExit(p, seconds(10));
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(*st, 0);
  EXPECT_GE(std::chrono::steady_clock::now() - start, seconds(1));
  EXPECT_TRUE(processAlive(escaped));
  ::kill(escaped, SIGKILL);
}

TEST(Process, WaitForExitTimesOut) {
  Process p(shell("sleep 1000"));
  EXPECT_FALSE(waitForExit(p, milliseconds(20)).has_value());
}

TEST(Process, LauncherStartsRealProcesses) {
  RealProcessLauncher launcher;
  auto child = launcher.start(shell("echo hi"));
  std::string out;
  EXPECT_EQ(waitForExit(*child, seconds(10), &out), 0);
  EXPECT_EQ(out, "hi\n");
}

// A killed worker must not leave its builders running unsupervised.
TEST(Process, ChildDiesWithTheProcessThatStartedIt) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t middle = ::fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    ::close(fds[0]);
    Process p(shell("exec sleep 1000"));
    pid_t child = p.pid();
    if (::write(fds[1], &child, sizeof child) != sizeof child) _exit(1);
    for (;;) ::pause();
  }
  ::close(fds[1]);
  pid_t child = 0;
  ASSERT_EQ(::read(fds[0], &child, sizeof child),
            static_cast<ssize_t>(sizeof child));
  ::close(fds[0]);
  ASSERT_TRUE(processAlive(child));
  ::kill(middle, SIGKILL);
  int st = 0;
  ASSERT_EQ(::waitpid(middle, &st, 0), middle);
  EXPECT_TRUE(
      test::pollUntil([&] { return !processAlive(child); }, seconds(10)));
}

TEST(Process, ProcessAliveOfUnknownPid) {
  EXPECT_TRUE(processAlive(::getpid()));
  EXPECT_FALSE(processAlive(0x3fffffff));
}

// waitForExit's deadline is read from the clock it is given: a scripted
// child on a FakeClock times out at exactly the deadline, without waiting.
TEST(Process, WaitForExitOnAFakeClock) {
  FakeClock clock;
  testing::ScriptedLauncher launcher(clock);
  launcher.script = {testing::output(seconds(1), "early"),
                     testing::exitWith(seconds(100), 3)};
  auto child = launcher.start(shell("unused"));
  auto t0 = clock.now();
  std::string out;
  EXPECT_FALSE(waitForExit(*child, seconds(10), &out, clock).has_value());
  EXPECT_EQ(out, "early");
  EXPECT_EQ(clock.now() - t0, seconds(10));
  EXPECT_EQ(waitForExit(*child, seconds(200), &out, clock), 3 << 8);
  EXPECT_EQ(clock.now() - t0, seconds(100));
}

TEST(FakeClock, MovesOnlyWhenAdvanced) {
  FakeClock clock;
  auto t0 = clock.now();
  EXPECT_EQ(clock.now(), t0);
  clock.advance(seconds(5));
  EXPECT_EQ(clock.now() - t0, seconds(5));
  clock.advance(-seconds(1));
  EXPECT_EQ(clock.now() - t0, seconds(5));
  auto r0 = RealClock::instance().now();
  EXPECT_GE(RealClock::instance().now(), r0);
}

}  // namespace
}  // namespace kiln
