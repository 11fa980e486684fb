// A `kiln` child process for tests (kiln_process.h).
#include "kiln_process.h"

#include <signal.h>

#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln::test {

KilnProcess::KilnProcess(const std::vector<std::string>& args,
                         std::string logFile,
                         const std::map<std::string, std::string>& extraEnv,
                         const std::string& netns)
    : logFile_(std::move(logFile)) {
  // Its own session, the output in the log file, SIGKILLed when the test's
  // thread ends (even if the test is killed).
  ProcessSpec spec;
  spec.program = kilnBinary();
  spec.args = {spec.program};
  if (!netns.empty()) {
    spec.program = "ip";
    spec.searchPath = true;
    spec.args = {"ip", "netns", "exec", netns, kilnBinary()};
  }
  spec.args.insert(spec.args.end(), args.begin(), args.end());
  spec.env = currentEnvironment();
  for (auto& [k, v] : extraEnv) spec.env[k] = v;
  spec.outputFile = logFile_;
  spec.truncateOutputFile = true;
  proc_ = std::make_unique<Process>(spec);
}

KilnProcess::~KilnProcess() {
  if (running()) kill();
}

bool KilnProcess::running() { return !exitCode().has_value(); }

std::optional<int> KilnProcess::exitCode() {
  return waitExit(std::chrono::milliseconds(0));
}

std::optional<int> KilnProcess::waitExit(std::chrono::milliseconds timeout) {
  if (!exit_) {
    auto ev = proc_->next(timeout);
    if (ev.kind == ProcessEvent::Kind::kExited) exit_ = exitCodeOf(ev.status);
  }
  return exit_;
}

void KilnProcess::signal(int sig) {
  if (running()) proc_->signal(sig);
}

int KilnProcess::kill() {
  signal(SIGKILL);
  return waitExit(std::chrono::hours(1)).value_or(-1);
}

int KilnProcess::stop(std::chrono::milliseconds grace) {
  signal(SIGCONT);  // a paused process cannot handle SIGTERM
  signal(SIGTERM);
  if (auto c = waitExit(grace)) return *c;
  return kill();
}

std::string KilnProcess::log() const {
  return pathExists(logFile_) ? readFile(logFile_) : "";
}

bool KilnProcess::waitForLog(const std::string& text,
                             std::chrono::milliseconds timeout) {
  return pollUntil(
             [&] {
               return log().find(text) != std::string::npos || !running();
             },
             timeout) &&
         log().find(text) != std::string::npos;
}

}  // namespace kiln::test
