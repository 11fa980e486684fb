#pragma once
/// The farm `kiln build` runs inside its own process: a scheduler service
/// on the calling thread and local worker daemons on threads of their
/// own, talking ZeroMQ over a Unix socket in the state directory (plain
/// text: the socket's folder is private to the user). Workers build in
/// the chosen sandbox (default `linux`, which works without root through
/// user namespaces) into stores of their own under `<state>/build-worker`;
/// outputs land in the central store of `<state>`.

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kiln/scheduler/build_events.h"
#include "kiln/scheduler/service.h"
#include "kiln/worker/daemon.h"
#include "sandbox_options.h"

namespace kiln::cli {

/// What the embedded farm needs.
struct LocalFarmConfig {
  std::string stateDir;  ///< the central state (scheduler.sqlite, store)
  std::string storeDir = "/nix/store";
  unsigned jobs = 1;  ///< builds at once (one worker, this many slots)
  SandboxOptions sandbox;
  /// fsync each file added to the central and the worker's store
  /// (store::LocalStore::ContentSync); false is Nix's default.
  bool syncStoreFiles = true;
};

/// The running farm. Construction takes the scheduler lock (Error if a
/// `kiln scheduler` or another `kiln build` uses the state directory),
/// opens the state and starts the worker thread; the destructor stops
/// and joins the workers. Not thread-safe: use it from one thread.
class LocalFarm {
 public:
  explicit LocalFarm(const LocalFarmConfig& config);
  ~LocalFarm();
  LocalFarm(const LocalFarm&) = delete;
  LocalFarm& operator=(const LocalFarm&) = delete;

  /// The scheduler (serve it with pollOnce on this thread).
  scheduler::SchedulerService& scheduler() { return *service_; }
  /// The jobset `kiln build`'s builds belong to (project "cli", jobset
  /// "kiln-build"), created when missing (looked up once).
  int64_t jobset();
  /// Whether a build changed (a build event reached the database) since
  /// the last call; true at the first. Lets the build loop read its
  /// counts only when they can have changed.
  bool takeBuildChanges();
  /// Why a worker thread ended early ("" while all run).
  std::string workerFailure() const;

 private:
  struct Worker {
    std::unique_ptr<worker::Daemon> daemon;
    std::thread thread;
    std::string failure;  // written by the thread before it ends
    std::atomic<bool> ended{false};
  };
  /// Notes that some build event happened (on the service's thread).
  class ChangeSink : public scheduler::BuildEventSink {
   public:
    void onBuildEvent(const scheduler::BuildEvent&, int64_t) override {
      changed = true;
    }
    void onLifecycleEvent(const scheduler::LifecycleEvent&, int64_t) override {
      changed = true;
    }
    bool changed = true;
  };
  void startWorker(const LocalFarmConfig& config, const std::string& endpoint);
  int64_t findOrCreateJobset();

  std::shared_ptr<ChangeSink> changes_ = std::make_shared<ChangeSink>();
  int64_t jobset_ = 0;  // 0: not looked up yet
  std::unique_ptr<scheduler::SchedulerService> service_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace kiln::cli
