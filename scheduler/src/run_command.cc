// runCommand: a helper program through the one process spawner
// (kiln/common/process.h), stdout and stderr captured apart.
#include "run_command.h"

#include <sys/wait.h>

#include "kiln/common/error.h"
#include "kiln/common/process.h"

namespace kiln::scheduler {
namespace {

constexpr size_t kMaxCapture = 256u << 20;

}  // namespace

CommandResult runCommand(const std::vector<std::string>& argv,
                         const std::string& cwd) {
  if (argv.empty()) throw Error("runCommand: empty command");
  ProcessSpec spec;
  spec.program = argv[0];
  spec.args = argv;
  spec.env = currentEnvironment();
  spec.workDir = cwd;
  spec.searchPath = true;
  spec.separateStderr = true;
  Process child(spec);
  CommandResult r;
  for (;;) {
    auto ev = child.next(std::chrono::hours(1));
    if (ev.kind == ProcessEvent::Kind::kOutput) {
      std::string& buf = ev.stream == 2 ? r.err : r.out;
      if (buf.size() < kMaxCapture) buf.append(ev.data);
    } else if (ev.kind == ProcessEvent::Kind::kExited) {
      int st = ev.status;
      r.exitCode = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return r;
    }
  }
}

}  // namespace kiln::scheduler
