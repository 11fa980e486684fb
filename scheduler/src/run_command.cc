// runCommand: fork/exec with two capture pipes, read with poll().
#include "run_command.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "kiln/common/error.h"
#include "kiln/common/file.h"

namespace kiln::scheduler {
namespace {

constexpr size_t kMaxCapture = 256u << 20;

[[noreturn]] void execChild(const std::vector<std::string>& argv,
                            const std::string& cwd, int outFd, int errFd) {
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(outFd, 1) < 0 ||
      dup2(errFd, 2) < 0)
    _exit(127);
  if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(127);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  _exit(127);
}

}  // namespace

CommandResult runCommand(const std::vector<std::string>& argv,
                         const std::string& cwd) {
  if (argv.empty()) throw Error("runCommand: empty command");
  int outPipe[2], errPipe[2];
  if (pipe2(outPipe, O_CLOEXEC)) throwSysError("pipe");
  AutoCloseFD outR(outPipe[0]), outW(outPipe[1]);
  if (pipe2(errPipe, O_CLOEXEC)) throwSysError("pipe");
  AutoCloseFD errR(errPipe[0]), errW(errPipe[1]);
  pid_t pid = fork();
  if (pid < 0) throwSysError("fork for " + argv[0]);
  if (pid == 0) execChild(argv, cwd, outW.get(), errW.get());
  outW.reset();
  errW.reset();
  CommandResult r;
  pollfd fds[2] = {{outR.get(), POLLIN, 0}, {errR.get(), POLLIN, 0}};
  std::string* bufs[2] = {&r.out, &r.err};
  int open = 2;
  char buf[65536];
  while (open > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      throwSysError("poll");
    }
    for (int i = 0; i < 2; i++) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        fds[i].fd = -1;
        open--;
      } else if (bufs[i]->size() < kMaxCapture) {
        bufs[i]->append(buf, static_cast<size_t>(n));
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throwSysError("waitpid");
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status)
                                 : 128 + WTERMSIG(status);
  return r;
}

}  // namespace kiln::scheduler
