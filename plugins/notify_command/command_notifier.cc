// The `command` notifier plugin (docs/plugin-abi.md, docs/operations.md
// "Notifications"): runs the configured shell command once per event with
// the event's JSON on standard input, like Hydra's RunCommand. A non-zero
// exit, a signal or the time limit is a failure, so the event is retried.
// The command runs in a process group of its own: at the time limit the
// whole group is killed, not only the shell.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

#include "kiln/common/spawner.h"
#include "kiln/plugin/plugin.hpp"

extern char** environ;

namespace {

using kiln::plugin::Failure;

/// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

class CommandNotifier {
 public:
  explicit CommandNotifier(kiln::plugin::Host host) : host_(host) {
    auto cmd = host.config("command");
    if (!cmd || cmd->empty())
      throw Failure(KILN_ERR_INVALID,
                    "the command notifier needs a command (--notify "
                    "command:CMD)");
    command_ = *cmd;
    if (auto t = host.config("timeout-ms")) {
      try {
        timeoutMs_ = std::stol(*t);
      } catch (const std::exception&) {
        timeoutMs_ = -1;
      }
      if (timeoutMs_ <= 0)
        throw Failure(KILN_ERR_INVALID, "timeout-ms must be a positive number");
    }
  }

  void deliver(const std::string& event, const std::string& body) {
    int sv[2];
    // A socket, not a pipe: send(MSG_NOSIGNAL) never raises SIGPIPE in the
    // host when the command exits without reading.
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      throw Failure::sys("socketpair");
    Fd ours{sv[0]}, theirs{sv[1]};
    auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs_);
    pid_t pid = spawn(theirs.fd, event);
    theirs.reset();
    sendAll(ours.fd, body, deadline);
    shutdown(ours.fd, SHUT_WR);
    int status = wait(pid, deadline);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
    throw Failure(
        KILN_ERR_FAILED,
        "command '" + command_ + "' " +
            (WIFEXITED(status)
                 ? "exited with " + std::to_string(WEXITSTATUS(status))
                 : "was killed by signal " + std::to_string(WTERMSIG(status))));
  }

 private:
  pid_t spawn(int stdinFd, const std::string& event) {
    std::string ev = "KILN_EVENT=" + event;
    std::vector<char*> env;
    for (char** e = environ; *e; e++) env.push_back(*e);
    env.push_back(ev.data());
    env.push_back(nullptr);
    const char* argv[] = {"/bin/sh", "-c", command_.c_str(), nullptr};
    kiln::ProgramSpec spec;
    spec.program = "/bin/sh";
    spec.argv = const_cast<char* const*>(argv);
    spec.envp = env.data();
    spec.newProcessGroup = true;
    spec.actions.push_back({kiln::FileAction::Kind::kDup2, 0, stdinFd});
    pid_t pid = -1;
    int rc = kiln::systemSpawner().spawnProgram(spec, &pid);
    if (rc != 0) throw Failure::sys("running /bin/sh", rc);
    return pid;
  }

  using Clock = std::chrono::steady_clock;

  // Milliseconds left until `deadline` (0 when it passed).
  static int remainingMs(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    return left.count() > 0 ? static_cast<int>(left.count()) : 0;
  }

  // Writes the body until done, the command stops reading, or `deadline`
  // (a command that never reads a large body cannot block the host).
  static void sendAll(int fd, const std::string& body,
                      Clock::time_point deadline) {
    size_t off = 0;
    while (off < body.size()) {
      struct pollfd p = {fd, POLLOUT, 0};
      int r = poll(&p, 1, remainingMs(deadline));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return;  // the time limit: wait() kills it
      ssize_t n = send(fd, body.data() + off, body.size() - off,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n < 0) return;  // it stopped reading: its exit status decides
      off += static_cast<size_t>(n);
    }
  }

  // Waits for the command, killing its process group at `deadline`.
  int wait(pid_t pid, Clock::time_point deadline) {
    Fd pfd{static_cast<int>(syscall(SYS_pidfd_open, pid, 0))};
    if (pfd.fd >= 0) {
      struct pollfd p = {pfd.fd, POLLIN, 0};
      int r;
      do r = poll(&p, 1, remainingMs(deadline));
      while (r < 0 && errno == EINTR);
      if (r == 0) {
        kill(-pid, SIGKILL);
        host_.log(KILN_LOG_WARN, "command '" + command_ + "' killed after " +
                                     std::to_string(timeoutMs_) + " ms");
      }
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
  }

  kiln::plugin::Host host_;
  std::string command_;
  long timeoutMs_ = 60000;
};

}  // namespace

KILN_NOTIFIER_PLUGIN(CommandNotifier, "command", "1.0.0",
                     "runs a command with each event's JSON on stdin")
