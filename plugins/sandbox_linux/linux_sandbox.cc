// The `linux` sandbox (docs/worker.md, "Sandboxes"): each build in fresh
// user, mount, PID, IPC, UTS and (except fixed-output builds) network
// namespaces, in a new root holding only its input closure (read-only, at
// the logical store path), its build directory, the outputs' parent, a
// minimal /dev and /proc and the configured extra paths; the builder runs
// as uid 1000 / gid 100 inside, mapped to a build user from a pool when the
// worker is root (its own uid otherwise), with no capabilities and
// no_new_privs. The builder is PID 1 of its namespace: when it ends, the
// kernel kills everything it left behind.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "build_users.h"
#include "kiln/common/spawner.h"
#include "kiln/plugin/plugin.hpp"
#include "root_pool.h"
#include "sandbox_plan.h"
#include "seccomp_filter.h"

namespace kiln::sandbox_linux {
namespace {

namespace ps = plugin_support;
using plugin::Failure;

constexpr uid_t kInsideUid = 1000;  // nixbld, as in Nix 2.8
constexpr gid_t kInsideGid = 100;
constexpr size_t kStackSize = 256 * 1024;

void writeProcFile(pid_t pid, const char* file, const std::string& text) {
  std::string path = "/proc/" + std::to_string(pid) + "/" + file;
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw Failure::sys("opening " + path);
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size()))
    throw Failure::sys("writing '" + text + "' to " + path, err);
}

unsigned long configNumber(const plugin::Host& host, const char* key,
                           unsigned long dflt) {
  auto v = host.config(key);
  if (!v) return dflt;
  try {
    return std::stoul(*v);
  } catch (...) {
    throw Failure(KILN_ERR_INVALID, std::string("sandbox option ") + key +
                                        ": not a number: " + *v);
  }
}

// The system-call filter, unless the option `seccomp` is "false" (for
// debugging only: docs/worker.md).
std::unique_ptr<SeccompFilter> filterOf(const plugin::Host& host) {
  std::string v = host.config("seccomp").value_or("true");
  if (v == "false") {
    host.log(KILN_LOG_WARN,
             "the linux sandbox runs builds without its system-call filter "
             "(seccomp=false): builds may make setuid files; for debugging "
             "only");
    return nullptr;
  }
  if (v != "true")
    throw Failure(KILN_ERR_INVALID,
                  "sandbox option seccomp: 'true' or 'false', not '" + v + "'");
  return std::make_unique<SeccompFilter>();
}

std::string defaultLockDir() {
  return ::access("/run", W_OK) == 0 ? "/run/kiln-build-users"
                                     : "/tmp/kiln-build-users";
}

/// The child's stack. The child shares the worker's memory until it
/// executes the builder (CLONE_VM), so the stack must stay mapped until
/// the child has executed or been reaped: the owner of this object waits
/// for either before it goes.
class ChildStack {
 public:
  ChildStack() {
    base_ = ::mmap(nullptr, kStackSize, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (base_ == MAP_FAILED) throw Failure::sys("allocating a stack");
  }
  ~ChildStack() { ::munmap(base_, kStackSize); }
  ChildStack(const ChildStack&) = delete;
  ChildStack& operator=(const ChildStack&) = delete;
  /// The stack's top (it grows down).
  char* top() const { return static_cast<char*>(base_) + kStackSize; }

 private:
  void* base_;
};

/// Starts the child in its namespaces; returns its pid (host view).
/// CLONE_VM: no copy of the worker's page tables and no copy-on-write
/// faults in the child (it only makes system calls until execve, see
/// sandbox_child.h), which made up most of a sandbox start's CPU.
pid_t cloneChild(ProcessSpawner& spawner, ChildPlan& plan, bool network,
                 const ChildStack& stack) {
  SpawnOptions options;
  options.cloneFlags = CLONE_VM | CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID |
                       CLONE_NEWIPC | CLONE_NEWUTS;
  if (!network) options.cloneFlags |= CLONE_NEWNET;
  options.stackTop = stack.top();
  pid_t pid = spawner.spawn(childMain, &plan, options);
  int err = errno;
  if (pid < 0)
    throw Failure(KILN_ERR_UNSUPPORTED,
                  std::string("cannot create the sandbox's namespaces "
                              "(clone): ") +
                      std::strerror(err) +
                      "; user namespaces may be disabled on this host",
                  err);
  return pid;
}

void killAndReap(pid_t pid) {
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

class LinuxSandbox {
 public:
  /// One build's root, build user and outputs.
  struct Build {
    std::unique_ptr<RootDir> root;
    std::string poolKey;  ///< empty: the root is removed, never reused
    std::optional<BuildUser> user;
    std::string storeInRoot, tmpInRoot, physicalStore;
    std::vector<std::string> outputs;
  };
  static constexpr uint32_t kCapabilities =
      KILN_SANDBOX_MAPS_STORE | KILN_SANDBOX_ISOLATES;

  explicit LinuxSandbox(plugin::Host host)
      : host_(host),
        extra_(parseExtraPaths(host.config("extra-paths").value_or(""))),
        pool_(
            static_cast<uid_t>(
                configNumber(host, "build-users-first", 872415232)),
            static_cast<unsigned>(configNumber(host, "build-users-count", 128)),
            host.config("build-users-lock-dir").value_or(defaultLockDir())),
        filter_(filterOf(host)) {}

  std::string buildDir(const std::string&) { return "/build"; }

  /// The layout key of `spec`'s root: everything its skeleton depends on.
  static std::string layoutKey(const kiln_sandbox_spec& spec);
  std::unique_ptr<Build> start(const kiln_sandbox_spec& spec,
                               kiln_sandbox_process& process);
  void finish(std::unique_ptr<Build> build);
  void probe();

 private:
  pid_t launch(const kiln_sandbox_spec& spec, const SandboxPlan& plan,
               uid_t hostUid, gid_t hostGid, ps::ChildPipes& pipes);

  /// Destroys finished builds (their roots, their build users' locks) on
  /// a thread of its own, started at the first; its destructor waits for
  /// the ones still queued. Never throws (a root that cannot be removed
  /// is left, as RootDir says).
  class Reaper {
   public:
    explicit Reaper(RootPool& pool) : pool_(pool) {}
    Reaper(const Reaper&) = delete;
    Reaper& operator=(const Reaper&) = delete;
    ~Reaper() {
      {
        std::lock_guard lock(mu_);
        stop_ = true;
      }
      cv_.notify_one();
      if (thread_.joinable()) thread_.join();
    }
    void add(std::unique_ptr<Build> build) {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(build));
      if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
      cv_.notify_one();
    }

   private:
    void run() {
      std::unique_lock lock(mu_);
      for (;;) {
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        auto doomed = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        recycle(std::move(doomed));
        lock.lock();
      }
    }
    /// A reusable root goes back to the pool, emptied where its builder
    /// could write; the rest (the build user's lock) is released.
    void recycle(std::unique_ptr<Build> build) {
      if (!build->poolKey.empty())
        pool_.give(build->poolKey, std::move(build->root),
                   {build->tmpInRoot, build->storeInRoot});
    }
    RootPool& pool_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::unique_ptr<Build>> queue_;
    bool stop_ = false;
    std::thread thread_;
  };

  plugin::Host host_;
  ProcessSpawner& spawner_ = systemSpawner();  // clone with namespaces
  std::vector<ExtraPath> extra_;
  BuildUserPool pool_;
  std::unique_ptr<SeccompFilter> filter_;  // null: seccomp=false
  RootPool roots_;         // before reaper_, which hands roots back to it
  Reaper reaper_{roots_};  // last: finishes its queue before the rest goes
};

std::unique_ptr<LinuxSandbox::Build> LinuxSandbox::start(
    const kiln_sandbox_spec& spec, kiln_sandbox_process& process) {
  auto build = std::make_unique<Build>();
  uid_t hostUid = ::geteuid();
  gid_t hostGid = ::getegid();
  // A build user owns nothing of the skeleton but /tmp and the store
  // directory; a builder running as the worker's own uid owns all of it
  // and might have changed it, so its root is never reused.
  if (hostUid == 0) build->poolKey = layoutKey(spec);
  build->root = build->poolKey.empty()
                    ? std::make_unique<RootDir>(spec.scratch_dir)
                    : roots_.take(build->poolKey, spec.scratch_dir);
  build->storeInRoot = build->root->host(spec.logical_store);
  build->tmpInRoot = build->root->host("/tmp");
  build->physicalStore = spec.physical_store;
  for (auto* o = spec.outputs; o && *o; ++o) build->outputs.push_back(*o);
  if (hostUid == 0) {  // root: a build user from the pool
    build->user = pool_.acquire();
    hostUid = hostGid = build->user->uid();
    chownTree(spec.host_build_dir, hostUid, hostGid);
  }
  SandboxPlan plan(spec, *build->root, extra_, hostGid);
  ps::ChildPipes pipes;
  pipes.open();
  process.pid = launch(spec, plan, hostUid, hostGid, pipes);
  process.output_fd = pipes.outRead;
  pipes.outRead = -1;
  host_.metricAdd("builds_total", 1);
  return build;
}

pid_t LinuxSandbox::launch(const kiln_sandbox_spec& spec,
                           const SandboxPlan& plan, uid_t hostUid,
                           gid_t hostGid, ps::ChildPipes& pipes) {
  ChildStack stack;  // goes last, after the child executed or was reaped
  int sync[2];
  if (::pipe2(sync, O_CLOEXEC) < 0) throw Failure::sys("creating a pipe");
  ChildPlan cp;
  cp.syncRead = sync[0];
  cp.root = plan.mounts().front().target;  // the root's self-bind
  cp.mounts = plan.mounts().data();
  cp.mountCount = plan.mounts().size();
  cp.ownNetwork = spec.network == 0;
  cp.dropGroups = ::geteuid() == 0;
  cp.uid = kInsideUid;
  cp.gid = kInsideGid;
  cp.seccomp = filter_ ? filter_->program() : nullptr;
  cp.exec = {spec.program,
             const_cast<char* const*>(spec.argv),
             const_cast<char* const*>(spec.envp),
             spec.work_dir,
             static_cast<mode_t>(spec.umask),
             pipes.devNull,
             pipes.outWrite,
             pipes.statusWrite};
  pid_t pid;
  try {
    pid = cloneChild(spawner_, cp, spec.network != 0, stack);
  } catch (...) {
    ::close(sync[0]);
    ::close(sync[1]);
    throw;
  }
  ::close(sync[0]);
  try {
    if (::geteuid() != 0) writeProcFile(pid, "setgroups", "deny");
    writeProcFile(
        pid, "uid_map",
        std::to_string(kInsideUid) + " " + std::to_string(hostUid) + " 1");
    writeProcFile(
        pid, "gid_map",
        std::to_string(kInsideGid) + " " + std::to_string(hostGid) + " 1");
    // The child waits for the sync byte: it has started nothing yet.
    ps::joinCgroups(ps::cgroupProcsOf(spec), pid);
  } catch (...) {
    ::close(sync[1]);
    killAndReap(pid);
    throw;
  }
  ssize_t n = ::write(sync[1], "x", 1);
  (void)n;
  ::close(sync[1]);
  ::close(pipes.outWrite);
  pipes.outWrite = -1;
  ::close(pipes.statusWrite);
  pipes.statusWrite = -1;
  if (auto failed = ps::readChildStatus(pipes.statusRead)) {
    killAndReap(pid);
    int step = failed->first - ps::kStageSandbox;
    ps::throwStageFailure(failed->first, failed->second, spec.program,
                          step > 0 ? stepName(step) : "starting");
  }
  return pid;
}

std::string LinuxSandbox::layoutKey(const kiln_sandbox_spec& spec) {
  // The extra paths of the plugin's configuration are the same for every
  // build; the spec's own (ABI minor 2) and the network's /etc files vary.
  std::string key = std::string(spec.scratch_dir) + '\0' + spec.logical_store +
                    '\0' + (spec.network ? "net" : "nonet");
  if (spec.size >= offsetof(kiln_sandbox_spec, extra_paths) + sizeof(void*) &&
      spec.extra_paths)
    for (auto p = spec.extra_paths; *p; ++p) {
      key += '\0';
      key += *p;
    }
  return key;
}

void LinuxSandbox::finish(std::unique_ptr<Build> build) {
  // Every process of the build is gone (the host reaped PID 1 of its
  // namespace); move the outputs it made out of the root into the store.
  for (auto& out : build->outputs) {
    std::string from = build->storeInRoot + "/" + out;
    std::string to = build->physicalStore + "/" + out;
    struct stat st;
    if (::lstat(from.c_str(), &st) < 0) continue;
    if (::rename(from.c_str(), to.c_str()) < 0)
      throw Failure::sys("moving output " + from + " to " + to +
                         (errno == EXDEV
                              ? " (the build directory's parent must be on "
                                "the store's file system)"
                              : ""));
  }
  // The outputs are out; what is left (the root's mount points, /etc,
  // /dev, the build user's lock) only has to go eventually. Removing it
  // costs a few ms per directory on a busy disk, about 80 ms a build, so
  // it is done off the build's path: the step reports meanwhile. A
  // worker stopping waits for it (the Reaper's destructor).
  reaper_.add(std::move(build));
}

void LinuxSandbox::probe() {
  RootDir scratch("/tmp");
  std::string buildDir = scratch.path() + "/build";
  if (::mkdir(buildDir.c_str(), 0700) < 0) throw Failure::sys("mkdir");
  const char* argv[] = {"probe", nullptr};
  const char* envp[] = {nullptr};
  const char* none[] = {nullptr};
  kiln_sandbox_spec spec{};
  spec.size = sizeof spec;
  spec.program = "/kiln-sandbox-probe-does-not-exist";
  spec.argv = argv;
  spec.envp = envp;
  spec.work_dir = "/build";
  spec.umask = 022;
  spec.host_build_dir = buildDir.c_str();
  spec.scratch_dir = scratch.path().c_str();
  spec.logical_store = "/nix/store";
  spec.physical_store = scratch.path().c_str();
  spec.inputs = none;
  spec.outputs = none;
  kiln_sandbox_process proc{};
  try {
    start(spec, proc);
  } catch (const Failure& f) {
    if (f.code() == KILN_ERR_SYSTEM && f.sysErrno() == ENOENT) return;
    throw Failure(
        KILN_ERR_UNSUPPORTED,
        std::string("the linux sandbox cannot work here: ") + f.what());
  }
  throw Failure(KILN_ERR_FAILED, "the sandbox probe started a missing program");
}

}  // namespace kiln::sandbox_linux

KILN_SANDBOX_PLUGIN(kiln::sandbox_linux::LinuxSandbox, "linux", "1.0.0",
                    "namespaces, a new root with only the input closure, "
                    "build users, no network")
