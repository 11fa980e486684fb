#include "run_capture.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

#include "kiln/common/spawner.h"
#include "kiln/plugin/plugin.hpp"

extern char** environ;

namespace kiln::plugin_support {
namespace {

using kiln::plugin::Failure;

/// Both ends of a pipe, closed when they go out of scope.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (pipe2(fd, O_CLOEXEC) != 0) throw Failure::sys("pipe");
  }
  ~Pipe() {
    closeEnd(0);
    closeEnd(1);
  }
  void closeEnd(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
};

pid_t spawn(const std::vector<std::string>& argv, const std::string& cwd,
            const std::vector<std::string>* env, Pipe& out, Pipe& err) {
  using Action = FileAction;
  ProgramSpec spec;
  spec.actions.push_back(
      {Action::Kind::kOpen, 0, -1, "/dev/null", O_RDONLY, 0});
  spec.actions.push_back({Action::Kind::kDup2, 1, out.fd[1]});
  spec.actions.push_back({Action::Kind::kDup2, 2, err.fd[1]});
  if (!cwd.empty())
    spec.actions.push_back({Action::Kind::kChdir, -1, -1, cwd.c_str()});
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  if (env) {
    for (auto& e : *env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  spec.program = argv[0].c_str();
  spec.argv = args.data();
  spec.envp = env ? envp.data() : environ;
  spec.searchPath = true;
  pid_t pid = -1;
  int rc = systemSpawner().spawnProgram(spec, &pid);
  if (rc != 0) throw Failure::sys("running " + argv[0], rc);
  return pid;
}

/// Reads both pipes until both are closed.
void drain(Pipe& out, Pipe& err, size_t limit, CaptureResult& r) {
  std::string* bufs[2] = {&r.out, &r.err};
  int* fds[2] = {&out.fd[0], &err.fd[0]};
  char chunk[65536];
  while (*fds[0] >= 0 || *fds[1] >= 0) {
    struct pollfd p[2] = {{*fds[0], POLLIN, 0}, {*fds[1], POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      throw Failure::sys("poll");
    }
    for (int i = 0; i < 2; i++) {
      if (*fds[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      ssize_t n = ::read(*fds[i], chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        (i == 0 ? out : err).closeEnd(0);
        continue;
      }
      size_t room = limit - std::min(limit, bufs[i]->size());
      bufs[i]->append(chunk, std::min(room, static_cast<size_t>(n)));
      if (static_cast<size_t>(n) > room) r.truncated = true;
    }
  }
}

}  // namespace

CaptureResult runCapture(const std::vector<std::string>& argv,
                         const std::string& cwd, size_t limit,
                         const std::vector<std::string>* env) {
  if (argv.empty()) throw Failure(KILN_ERR_INVALID, "runCapture: no command");
  Pipe out, err;
  pid_t pid = spawn(argv, cwd, env, out, err);
  out.closeEnd(1);
  err.closeEnd(1);
  CaptureResult r;
  try {
    drain(out, err, limit, r);
  } catch (...) {
    kill(pid, SIGKILL);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    throw;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::vector<std::string> cleanEnvironment(
    const std::vector<std::string>& keep, const std::vector<std::string>& set) {
  auto kept = [&](std::string_view name) {
    for (auto& k : keep) {
      if (!k.empty() && k.back() == '*'
              ? name.substr(0, k.size() - 1) == std::string_view(k).substr(
                                                    0, k.size() - 1)
              : name == k)
        return true;
    }
    return false;
  };
  auto nameOf = [](std::string_view entry) {
    return entry.substr(0, entry.find('='));
  };
  std::vector<std::string> out;
  for (char** e = environ; *e; e++) {
    std::string_view entry(*e), name = nameOf(entry);
    if (!kept(name)) continue;
    bool replaced = false;
    for (auto& s : set) replaced = replaced || nameOf(s) == name;
    if (!replaced) out.emplace_back(entry);
  }
  out.insert(out.end(), set.begin(), set.end());
  return out;
}

std::string tailOf(const std::string& text, size_t maxBytes) {
  if (text.size() <= maxBytes) return text;
  return "…" + text.substr(text.size() - maxBytes);
}

}  // namespace kiln::plugin_support
