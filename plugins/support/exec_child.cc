#include "exec_child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kiln/plugin/plugin.hpp"

namespace kiln::plugin_support {

CStringArray::CStringArray(std::vector<std::string> strings)
    : strings_(std::move(strings)) {
  for (auto& s : strings_) ptrs_.push_back(s.data());
  ptrs_.push_back(nullptr);
}

const char* const* cgroupProcsOf(const kiln_sandbox_spec& spec) {
  if (spec.size < offsetof(kiln_sandbox_spec, cgroup_procs) + sizeof(void*))
    return nullptr;
  return spec.cgroup_procs;
}

void joinCgroups(const char* const* files, pid_t pid) {
  std::string text = std::to_string(pid);
  for (auto f = files; f && *f; ++f) {
    int fd = ::open(*f, O_WRONLY | O_CLOEXEC);
    if (fd < 0) throw plugin::Failure::sys(std::string("opening ") + *f);
    ssize_t n = ::write(fd, text.data(), text.size());
    int err = errno;
    ::close(fd);
    if (n != static_cast<ssize_t>(text.size()))
      throw plugin::Failure::sys("moving the builder to " + std::string(*f),
                                 err);
  }
}

bool joinCgroupsSelf(const char* const* files) {
  for (auto f = files; f && *f; ++f) {
    int fd = ::open(*f, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = ::write(fd, "0", 1) == 1;
    ::close(fd);
    if (!ok) return false;
  }
  return true;
}

void childFail(int statusFd, int stage) {
  int msg[2] = {stage, errno};
  ssize_t n = ::write(statusFd, msg, sizeof msg);
  (void)n;
  _exit(127);
}

void execBuilder(const ExecPlan& p) {
  if (::dup2(p.devNull, 0) < 0 || ::dup2(p.outWrite, 1) < 0 ||
      ::dup2(p.outWrite, 2) < 0)
    childFail(p.statusWrite, kStageStdio);
  if (p.workDir && ::chdir(p.workDir) < 0)
    childFail(p.statusWrite, kStageChdir);
  ::umask(p.umask);
  // The worker blocks or ignores signals; the builder starts with defaults.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
  // Descriptors the worker leaked without O_CLOEXEC must not reach it.
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  ::execve(p.program, p.argv, p.envp);
  childFail(p.statusWrite, kStageExec);
}

void ChildPipes::open() {
  int out[2], status[2];
  if (::pipe2(out, O_CLOEXEC) < 0)
    throw plugin::Failure::sys("creating the output pipe");
  outRead = out[0];
  outWrite = out[1];
  if (::pipe2(status, O_CLOEXEC) < 0)
    throw plugin::Failure::sys("creating the status pipe");
  statusRead = status[0];
  statusWrite = status[1];
  devNull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devNull < 0) throw plugin::Failure::sys("opening /dev/null");
}

void ChildPipes::closeAll() {
  for (int* fd : {&outRead, &outWrite, &statusRead, &statusWrite, &devNull})
    if (*fd >= 0) {
      ::close(*fd);
      *fd = -1;
    }
}

std::optional<std::pair<int, int>> readChildStatus(int statusRead) {
  int msg[2] = {0, 0};
  ssize_t n;
  do {
    n = ::read(statusRead, msg, sizeof msg);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof msg))
    return std::make_pair(msg[0], msg[1]);
  return std::nullopt;
}

void throwStageFailure(int stage, int err, const std::string& program,
                       const std::string& what) {
  switch (stage) {
    case kStageExec:
      throw plugin::Failure::sys("executing '" + program + "'", err);
    case kStageChdir:
      throw plugin::Failure::sys(
          "changing to the working directory for '" + program + "'", err);
    case kStageStdio:
      throw plugin::Failure::sys("redirecting stdio of '" + program + "'", err);
    case kStageCgroup:
      throw plugin::Failure::sys(
          "joining the build's control group for '" + program + "'", err);
    default:
      throw plugin::Failure(KILN_ERR_FAILED,
                            "setting up the sandbox for '" + program +
                                "': " + what + ": " + std::strerror(err),
                            err);
  }
}

}  // namespace kiln::plugin_support
