// Supervised children of `kiln serve` (serve_supervisor.h).
#include "serve_supervisor.h"

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "kiln/common/file.h"

namespace kiln::cli {

using namespace std::chrono_literals;

namespace {

constexpr auto kFirstBackoff = 500ms;
constexpr auto kMaxBackoff = 30000ms;
constexpr auto kStableRun = std::chrono::minutes(1);

size_t fileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
}

}  // namespace

std::chrono::milliseconds restartBackoff(unsigned failures) {
  auto d = kFirstBackoff;
  for (unsigned i = 1; i < failures && d < kMaxBackoff; i++) d *= 2;
  return std::min<std::chrono::milliseconds>(d, kMaxBackoff);
}

SupervisedChild::SupervisedChild(std::string name,
                                 std::vector<std::string> args,
                                 std::string logFile, const Clock& clock)
    : name_(std::move(name)),
      args_(std::move(args)),
      log_(std::move(logFile)),
      clock_(clock) {}

SupervisedChild::~SupervisedChild() {
  if (child_) stop(5s);
}

void SupervisedChild::start() {
  ProcessSpec spec;
  spec.program = "/proc/self/exe";
  spec.args = {"kiln"};
  spec.args.insert(spec.args.end(), args_.begin(), args_.end());
  spec.env = currentEnvironment();
  spec.outputFile = log_;
  spec.deathSignal = SIGTERM;
  logOffset_ = fileSize(log_);
  child_ = std::make_unique<Process>(spec);
  status_.reset();
  restartAt_.reset();
  startedAt_ = clock_.now();
}

bool SupervisedChild::running() { return child_ && !waitExit(0ms); }

std::string SupervisedChild::logSinceStart() const {
  std::ifstream in(log_, std::ios::binary);
  if (!in) return "";
  in.seekg(static_cast<std::streamoff>(logOffset_));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string SupervisedChild::supervise() {
  if (stopped_ || !child_) return "";
  auto now = clock_.now();
  if (restartAt_) {
    if (now < *restartAt_) return "";
    start();
    restarts_++;
    return name_ + " restarted (restart " + std::to_string(restarts_) +
           ", pid " + std::to_string(pid()) + ")";
  }
  if (running()) return "";
  failures_ = now - startedAt_ >= kStableRun ? 1 : failures_ + 1;
  auto wait = restartBackoff(failures_);
  restartAt_ = now + wait;
  return name_ + " exited (" + describeWaitStatus(*status_) +
         "); restarting in " + std::to_string(wait.count()) + " ms; see " +
         log_;
}

std::string SupervisedChild::stop(std::chrono::milliseconds grace) {
  stopped_ = true;
  if (!child_) return "not started";
  if (!running()) return describeWaitStatus(*status_);
  child_->signal(SIGTERM);
  if (!waitExit(grace)) {
    child_->killTree();
    waitExit(std::chrono::hours(1));
  }
  return describeWaitStatus(status_.value_or(0));
}

std::optional<int> SupervisedChild::waitExit(
    std::chrono::milliseconds timeout) {
  if (!status_ && child_) {
    auto ev = child_->next(timeout);
    if (ev.kind == ProcessEvent::Kind::kExited) status_ = ev.status;
  }
  return status_;
}

}  // namespace kiln::cli
