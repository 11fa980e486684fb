#include "kiln/common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kiln/common/error.h"

namespace kiln {

namespace {

using std::chrono::milliseconds;

/// A real child is waited for with poll(2), which counts real time: its
/// deadlines are read from the real clock (a FakeClock could not move
/// poll's timeout).
const Clock& realTime() { return RealClock::instance(); }

/// After the child exits and its group is killed, how long we keep reading
/// the pipe for output still buffered or held by an escaped descendant.
constexpr auto kDrainGrace = std::chrono::seconds(2);

/// Steps of the child between fork and exec; reported on failure.
enum ChildStage : int { kSetsid = 1, kStdio, kChdir, kExec, kCgroup };

/// Everything the child needs, prepared before fork (after fork only
/// async-signal-safe calls are allowed).
struct ChildSetup {
  const char* program;
  char* const* argv;
  char* const* envp;
  const char* workDir;  // nullptr: keep
  bool setUmask;
  mode_t umask;
  int stdinFd;      // /dev/null or ProcessSpec::inputFile
  int outWrite;     // the child's stdout
  int stderrWrite;  // the child's stderr
  int errWrite;     // the status pipe
  int deathSignal;
  pid_t parent;
  const char* const* cgroupProcs;  // NULL-terminated
};

[[noreturn]] void childFail(int errFd, int stage) {
  int msg[2] = {stage, errno};
  ssize_t n = ::write(errFd, msg, sizeof msg);
  (void)n;
  _exit(127);
}

[[noreturn]] void childMain(const ChildSetup& s) {
  for (auto* f = s.cgroupProcs; *f; ++f) {
    int fd = ::open(*f, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, "0", 1) != 1) childFail(s.errWrite, kCgroup);
    ::close(fd);
  }
  if (::setsid() < 0) childFail(s.errWrite, kSetsid);
  // The child dies with the thread that started it (and so with a killed
  // worker) instead of building on unsupervised; the check closes the race
  // with a parent that died before prctl.
  if (::prctl(PR_SET_PDEATHSIG, s.deathSignal) < 0 ||
      ::getppid() != s.parent)
    childFail(s.errWrite, kSetsid);
  if (::dup2(s.stdinFd, 0) < 0 || ::dup2(s.outWrite, 1) < 0 ||
      ::dup2(s.stderrWrite, 2) < 0)
    childFail(s.errWrite, kStdio);
  if (s.workDir && ::chdir(s.workDir) < 0) childFail(s.errWrite, kChdir);
  if (s.setUmask) ::umask(s.umask);
  // The parent may block or ignore signals (SIGPIPE, worker threads); the
  // builder must start with the defaults.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
  // Descriptors the parent leaked without O_CLOEXEC must not reach the child.
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  ::execve(s.program, s.argv, s.envp);
  childFail(s.errWrite, kExec);
}

// ProcessSpawner's entry point: `arg` is the ChildSetup.
int childEntry(void* arg) { childMain(*static_cast<const ChildSetup*>(arg)); }

std::string stageMessage(int stage, const ProcessSpec& spec) {
  switch (stage) {
    case kSetsid:
      return "creating a session for '" + spec.program + "'";
    case kStdio:
      return "redirecting stdio of '" + spec.program + "'";
    case kChdir:
      return "changing to working directory '" + spec.workDir + "' for '" +
             spec.program + "'";
    case kCgroup:
      return "joining the control group of '" + spec.program + "'";
    default:
      return "executing '" + spec.program + "'";
  }
}

// `program` itself if it names a path, else the first executable of that
// name in PATH (resolved before fork: execvp is not async-signal-safe).
std::string resolveProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = ::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string cand = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return program;  // execve fails with ENOENT and names it
}

// Where the child's stdout/stderr go: pipes to read (out, err) and the
// write ends the child gets, or one file for both.
struct ChildOutput {
  AutoCloseFD outRead, errRead, outWrite, errWrite;
};

ChildOutput openChildOutput(const ProcessSpec& spec) {
  ChildOutput o;
  if (!spec.outputFile.empty()) {
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC |
                (spec.truncateOutputFile ? O_TRUNC : O_APPEND);
    o.outWrite.reset(::open(spec.outputFile.c_str(), flags, 0644));
    if (!o.outWrite) throwSysError("opening " + spec.outputFile);
    return o;
  }
  int p[2];
  if (::pipe2(p, O_CLOEXEC) < 0) throwSysError("creating output pipe");
  o.outRead.reset(p[0]);
  o.outWrite.reset(p[1]);
  if (spec.separateStderr) {
    if (::pipe2(p, O_CLOEXEC) < 0) throwSysError("creating stderr pipe");
    o.errRead.reset(p[0]);
    o.errWrite.reset(p[1]);
  }
  return o;
}

void makeNonBlocking(const AutoCloseFD& fd) {
  if (fd && ::fcntl(fd.get(), F_SETFL, O_NONBLOCK) < 0)
    throwSysError("making an output pipe non-blocking");
}

std::vector<char*> cStrings(std::vector<std::string>& strs) {
  std::vector<char*> out;
  for (auto& s : strs) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

Process::Process(const ProcessSpec& spec) : Process(spec, systemSpawner()) {}

Process::Process(const ProcessSpec& spec, ProcessSpawner& spawner) {
  if (spec.program.empty())
    throw Error("cannot start a process: empty program");
  std::vector<std::string> args = spec.args;
  if (args.empty()) args.push_back(spec.program);
  std::vector<std::string> env;
  for (auto& [k, v] : spec.env) {
    if (k.empty() || k.find('=') != std::string::npos)
      throw Error("cannot start '" + spec.program +
                  "': invalid environment variable name '" + k + "'");
    env.push_back(k + "=" + v);
  }
  auto argv = cStrings(args);
  auto envp = cStrings(env);
  std::vector<std::string> groupFiles = spec.cgroupProcs;
  auto groups = cStrings(groupFiles);
  std::string program =
      spec.searchPath ? resolveProgram(spec.program) : spec.program;

  ChildOutput output = openChildOutput(spec);
  int errPipe[2];
  if (::pipe2(errPipe, O_CLOEXEC) < 0) throwSysError("creating status pipe");
  AutoCloseFD errRead(errPipe[0]), errWrite(errPipe[1]);
  std::string inputPath =
      spec.inputFile.empty() ? std::string("/dev/null") : spec.inputFile;
  AutoCloseFD input(::open(inputPath.c_str(), O_RDONLY | O_CLOEXEC));
  if (!input) throwSysError("opening " + inputPath + " as stdin");

  ChildSetup setup{
      program.c_str(),
      argv.data(),
      envp.data(),
      spec.workDir.empty() ? nullptr : spec.workDir.c_str(),
      spec.umask.has_value(),
      spec.umask.value_or(0),
      input.get(),
      output.outWrite.get(),
      output.errWrite ? output.errWrite.get() : output.outWrite.get(),
      errWrite.get(),
      spec.deathSignal,
      ::getpid(),
      groups.data()};
  pid_t pid = spawner.spawn(childEntry, &setup, SpawnOptions{});
  if (pid < 0) throwSysError("fork for '" + spec.program + "'");
  pid_ = pid;
  output.outWrite.reset();
  output.errWrite.reset();
  errWrite.reset();

  int msg[2] = {0, 0};
  ssize_t n;
  do {
    n = ::read(errRead.get(), msg, sizeof msg);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof msg)) {
    int st;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    throw SysError(stageMessage(msg[0], spec), msg[1]);
  }
  out_ = std::move(output.outRead);
  err_ = std::move(output.errRead);
  makeNonBlocking(out_);
  makeNonBlocking(err_);
  // Without pidfd support (kernels before 5.3) next() polls the exit state.
  pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0)));
}

Process::Process(pid_t pid, AutoCloseFD output)
    : pid_(pid), out_(std::move(output)) {
  makeNonBlocking(out_);
  pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0)));
}

Process::~Process() {
  if (reaped_) return;
  ::kill(-pid_, SIGKILL);
  int st;
  while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
  }
}

bool Process::childHasExited() {
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  // WNOWAIT: the child stays a zombie, so its pid (= the group id) cannot
  // be reused before we kill the group in reap().
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info,
               WEXITED | WNOHANG | WNOWAIT) < 0)
    return errno == ECHILD;
  return info.si_pid != 0;
}

void Process::reap() {
  ::kill(-pid_, SIGKILL);  // stragglers the builder left behind
  rusage ru{};
  while (::wait4(pid_, &status_, 0, &ru) < 0) {
    if (errno != EINTR) {
      status_ = 0;
      break;
    }
  }
  peakRssBytes_ = static_cast<size_t>(ru.ru_maxrss) * 1024;
  reaped_ = true;
  pidfd_.reset();
  drainDeadline_ = realTime().now() + kDrainGrace;
}

bool Process::readOutput(AutoCloseFD& fd, int stream, ProcessEvent& ev) {
  if (!fd) return false;
  char buf[65536];
  ssize_t n = ::read(fd.get(), buf, sizeof buf);
  if (n > 0) {
    ev.kind = ProcessEvent::Kind::kOutput;
    ev.stream = stream;
    ev.data.assign(buf, static_cast<size_t>(n));
    return true;
  }
  if (n == 0) {
    fd.reset();
  } else if (errno != EAGAIN && errno != EINTR) {
    throwSysError("reading output of process " + std::to_string(pid_));
  }
  return false;
}

ProcessEvent Process::next(milliseconds timeout) {
  ProcessEvent ev;
  auto deadline = realTime().now() + timeout;
  for (;;) {
    if (!reaped_ && childHasExited()) reap();
    if (readOutput(out_, 1, ev) || readOutput(err_, 2, ev)) return ev;
    auto now = realTime().now();
    if (reaped_ && now >= drainDeadline_) {
      out_.reset();
      err_.reset();
    }
    if (reaped_ && !out_ && !err_) {
      ev.kind = ProcessEvent::Kind::kExited;
      ev.status = status_;
      ev.peakRssBytes = peakRssBytes_;
      return ev;
    }
    if (now >= deadline) return ev;  // kIdle
    auto wait = deadline - now;
    if (reaped_) wait = std::min(wait, drainDeadline_ - now);
    if (!reaped_ && !pidfd_)
      wait = std::min<Clock::Duration>(wait, milliseconds(10));
    pollfd fds[3];
    nfds_t nfds = 0;
    if (out_) fds[nfds++] = {out_.get(), POLLIN, 0};
    if (err_) fds[nfds++] = {err_.get(), POLLIN, 0};
    if (!reaped_ && pidfd_) fds[nfds++] = {pidfd_.get(), POLLIN, 0};
    int ms = static_cast<int>(std::chrono::ceil<milliseconds>(wait).count());
    if (::poll(fds, nfds, ms) < 0 && errno != EINTR)
      throwSysError("waiting for process " + std::to_string(pid_));
  }
}

void Process::killTree() {
  if (!reaped_) ::kill(-pid_, SIGKILL);
}

void Process::signal(int sig) {
  if (!reaped_) ::kill(pid_, sig);
}

std::map<std::string, std::string> currentEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

std::optional<int> waitForExit(ChildProcess& child, milliseconds timeout,
                               std::string* output, const Clock& clock) {
  auto deadline = clock.now() + timeout;
  for (;;) {
    auto left = std::chrono::ceil<milliseconds>(deadline - clock.now());
    auto ev = child.next(std::max(left, milliseconds(0)));
    switch (ev.kind) {
      case ProcessEvent::Kind::kExited:
        return ev.status;
      case ProcessEvent::Kind::kOutput:
        if (output) output->append(ev.data);
        break;
      case ProcessEvent::Kind::kIdle:
        if (clock.now() >= deadline) return std::nullopt;
        break;
    }
  }
}

std::string describeWaitStatus(int status) {
  if (WIFEXITED(status))
    return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = ::sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) +
           (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

bool processAlive(pid_t pid) {
  std::string stat;
  try {
    stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  } catch (const SysError&) {
    return false;
  }
  // "pid (comm) S ...": the state follows the last ')' (comm may hold ')').
  auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  char state = stat[close + 2];
  return state != 'Z' && state != 'X';
}

std::string hostName() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "";
}

}  // namespace kiln
