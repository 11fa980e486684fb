// The `none` sandbox: runs the builder directly, as the worker's own user,
// with the host's file system and network. For development only: it says
// so at every start (docs/worker.md, "Sandboxes").
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec_child.h"
#include "kiln/common/spawner.h"
#include "kiln/plugin/plugin.hpp"

namespace {

namespace ps = kiln::plugin_support;

/// What the forked child needs (prepared before the fork).
struct NoneChild {
  ps::ExecPlan plan;
  const char* const* groups;
  pid_t parent;
};

/// The child: control groups, a session of its own, death with the
/// worker's thread, then the builder (ProcessSpawner::spawn's entry).
int noneChildMain(void* arg) {
  const auto& c = *static_cast<const NoneChild*>(arg);
  if (!ps::joinCgroupsSelf(c.groups))
    ps::childFail(c.plan.statusWrite, ps::kStageCgroup);
  if (::setsid() < 0) ps::childFail(c.plan.statusWrite, ps::kStageSession);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || ::getppid() != c.parent)
    ps::childFail(c.plan.statusWrite, ps::kStageSession);
  ps::execBuilder(c.plan);
}

class NoneSandbox {
 public:
  struct Build {};
  static constexpr uint32_t kCapabilities = 0;

  explicit NoneSandbox(kiln::plugin::Host host) : host_(host) {
    host_.log(KILN_LOG_WARN,
              "the 'none' sandbox is for development only: builders run "
              "unisolated, as this process's user, can read every file it "
              "can, use the network and write the store");
  }

  std::string buildDir(const std::string& hostBuildDir) { return hostBuildDir; }

  std::unique_ptr<Build> start(const kiln_sandbox_spec& spec,
                               kiln_sandbox_process& process) {
    host_.metricAdd("builds_total", 1);
    ps::ChildPipes pipes;
    pipes.open();
    ps::ExecPlan plan;
    plan.program = spec.program;
    plan.argv = const_cast<char* const*>(spec.argv);
    plan.envp = const_cast<char* const*>(spec.envp);
    plan.workDir = spec.work_dir;
    plan.umask = spec.umask;
    plan.devNull = pipes.devNull;
    plan.outWrite = pipes.outWrite;
    plan.statusWrite = pipes.statusWrite;
    NoneChild child{plan, ps::cgroupProcsOf(spec), ::getpid()};
    pid_t pid = spawner_.spawn(noneChildMain, &child, kiln::SpawnOptions{});
    if (pid < 0) throw kiln::plugin::Failure::sys("fork");
    ::close(pipes.outWrite);
    pipes.outWrite = -1;
    ::close(pipes.statusWrite);
    pipes.statusWrite = -1;
    if (auto failed = ps::readChildStatus(pipes.statusRead)) {
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      ps::throwStageFailure(failed->first, failed->second, spec.program,
                            "creating a session");
    }
    process.pid = pid;
    process.output_fd = pipes.outRead;
    pipes.outRead = -1;
    return std::make_unique<Build>();
  }

  void finish(std::unique_ptr<Build>) {}
  void probe() {}

 private:
  kiln::plugin::Host host_;
  kiln::ProcessSpawner& spawner_ = kiln::systemSpawner();
};

}  // namespace

KILN_SANDBOX_PLUGIN(NoneSandbox, "none", "1.0.0",
                    "no isolation: runs builders directly (development only)")
