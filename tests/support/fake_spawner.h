#pragma once
// A fake of the process spawner (kiln/common/spawner.h): records every
// start (entry or program, clone flags, argv) and either fails it with a
// scripted errno, as a full process table or a refused namespace would, or
// passes it on to another spawner (the real one by default). Tests give it
// to whatever takes a ProcessSpawner: `Process`, `RealProcessLauncher`,
// `JobWorkerOptions::spawner`.

#include <cerrno>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/common/spawner.h"

namespace kiln::testing {

/// One start the FakeSpawner saw.
struct SpawnCall {
  bool program = false;           ///< spawnProgram (else spawn)
  int cloneFlags = 0;             ///< spawn: SpawnOptions::cloneFlags
  std::vector<std::string> argv;  ///< spawnProgram: the arguments
  size_t actions = 0;             ///< spawnProgram: file actions
  int failedWith = 0;             ///< the errno it was failed with (0: ran)
};

/// Records starts; fails the next ones with `failures` (front first; 0
/// lets that one run), then lets every start run through `next`.
class FakeSpawner final : public ProcessSpawner {
 public:
  explicit FakeSpawner(ProcessSpawner& next = systemSpawner()) : next_(next) {}

  pid_t spawn(ChildEntry entry, void* arg,
              const SpawnOptions& options) override {
    SpawnCall call;
    call.cloneFlags = options.cloneFlags;
    if (int err = record(call)) {
      errno = err;
      return -1;
    }
    return next_.spawn(entry, arg, options);
  }

  int spawnProgram(const ProgramSpec& spec, pid_t* pid) override {
    SpawnCall call;
    call.program = true;
    for (auto a = spec.argv; a && *a; ++a) call.argv.emplace_back(*a);
    call.actions = spec.actions.size();
    if (int err = record(call)) return err;
    return next_.spawnProgram(spec, pid);
  }

  /// The starts seen so far.
  std::vector<SpawnCall> calls() const {
    std::lock_guard lock(mutex_);
    return calls_;
  }
  /// errno values for the next starts (0: let it run).
  void failNext(std::deque<int> errnos) {
    std::lock_guard lock(mutex_);
    failures_ = std::move(errnos);
  }

 private:
  int record(SpawnCall& call) {
    std::lock_guard lock(mutex_);
    if (!failures_.empty()) {
      call.failedWith = failures_.front();
      failures_.pop_front();
    }
    calls_.push_back(call);
    return call.failedWith;
  }

  ProcessSpawner& next_;
  mutable std::mutex mutex_;
  std::deque<int> failures_;
  std::vector<SpawnCall> calls_;
};

}  // namespace kiln::testing
