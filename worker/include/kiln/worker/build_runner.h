#pragma once
/// Runs one derivation's builder on this machine, in a sandbox (a sandbox
/// plugin, or unsandboxed through a plain ProcessLauncher), with the
/// environment Nix 2.8 gives builders;
/// supervises it (silence timeout, total timeout, log limit, cancellation:
/// each kills the builder's whole process group) and, on success, NAR-hashes
/// every output and scans it for references in one pass. docs/worker.md
/// describes the environment, the limits and the status codes.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/common/background_remover.h"
#include "kiln/common/clock.h"
#include "kiln/common/hash.h"
#include "kiln/common/process.h"
#include "kiln/common/status.h"
#include "kiln/store/derivation.h"
#include "kiln/store/store_path.h"
#include "kiln/worker/build_env.h"
#include "kiln/worker/cgroups.h"
#include "kiln/worker/cpu_shares.h"
#include "kiln/worker/limit_watch.h"
#include "kiln/worker/platform.h"
#include "kiln/worker/sandbox.h"

namespace kiln::worker {

/// Limits of one build; zero means "no limit".
struct BuildLimits {
  std::chrono::seconds maxSilent{3600};  ///< no output this long → status 7
  std::chrono::seconds timeout{36000};   ///< running this long → status 7
  uint64_t logLimitBytes = 0;            ///< more log than this → status 10
  uint64_t outputLimitBytes = 0;  ///< total NAR size of the outputs → status 11
  /// Memory, processes, CPU weight, build directory size (statuses 13 to
  /// 15); memory, processes and CPU need BuildRunnerConfig::cgroups.
  ResourceLimits resources;
};

/// Where the store is, for the builder and for the runner.
///
/// Path translation: output paths are logical (`logical.dir()`, default
/// /nix/store) and builders write to them directly. An unsandboxed builder
/// therefore only works when the physical store is reachable at the logical
/// directory: either they are the same folder (the worker's store root is
/// /nix/store, as when run as root in CI, or tests use a temporary store
/// whose logical and physical directories coincide) or the caller mounted
/// the physical store there (`mountedAtLogical`). The runner refuses other
/// layouts unless the sandbox maps the paths (Sandbox::mapsStore: the
/// `linux` sandbox mounts the inputs at their logical paths and moves the
/// outputs into the physical store).
struct StoreLayout {
  store::StoreDir logical;        ///< enters paths and NIX_STORE
  std::string physical;           ///< where the runner reads outputs
  bool mountedAtLogical = false;  ///< physical is also visible at logical
};

/// Global settings of a runner.
struct BuildRunnerConfig {
  StoreLayout store;
  std::string buildDirParent;  ///< where build dirs go; "" = $TMPDIR or /tmp
  EnvLookup impureEnv = processEnvLookup();  ///< for fixed-output impureEnvVars
  /// How builders of each system are executed (docs/worker.md,
  /// "Platforms"). Null, or no platform for the derivation's system: the
  /// builder is executed as it is.
  std::shared_ptr<const Platforms> platforms;
  /// Shares the CPUs among the runner's concurrent builders by rank
  /// (BuildRequest::rankMs). Null: they share the CPUs evenly.
  std::shared_ptr<CpuShares> cpuShares;
  /// One control group per build (docs/worker.md, "Limits per build"):
  /// every process of the build runs in it, its limits apply, it is
  /// measured, killed and removed as a whole. Null: no groups (then
  /// BuildLimits::resources may only set diskMaxBytes).
  std::shared_ptr<Cgroups> cgroups;
  /// Measures build directories (the disk limit and the peak size).
  std::shared_ptr<DirectorySize> dirSize = realDirectorySize();
};

/// One build to run.
struct BuildRequest {
  store::StorePath drvPath{"00000000000000000000000000000000-x.drv"};
  store::Derivation drv;
  /// The input closure (already present in the store); with the
  /// derivation's own outputs it forms the reference-scan candidates.
  store::StorePathSet inputClosure;
  BuildLimits limits;
  unsigned buildCores = 1;          ///< NIX_BUILD_CORES
  bool keepFailedBuildDir = false;  ///< leave the build dir of a failed build
  /// The step's critical path (BuildStep.rankMs): ranks the builder's CPU
  /// share against the others running (BuildRunnerConfig::cpuShares).
  uint64_t rankMs = 0;
};

/// One output of a successful build. The output stays at `physicalPath`
/// (unregistered); the caller adds it to a store or removes it.
struct BuiltOutputInfo {
  std::string name;  ///< "out", "dev", ...
  store::StorePath path{"00000000000000000000000000000000-x"};
  std::string physicalPath;
  Hash narHash{HashAlgo::kSha256};
  uint64_t narSize = 0;
  store::StorePathSet references;  ///< subset of the candidates
};

/// What happened.
struct BuildResult {
  StepStatus status = StepStatus::kFailed;
  std::string errorMsg;                  ///< empty on success
  std::optional<int> waitStatus;         ///< the builder's, once it ended
  std::vector<BuiltOutputInfo> outputs;  ///< success only, by output name
  uint64_t logBytes = 0;                 ///< log bytes passed to the callback
  Clock::Duration duration{};            ///< builder start to end
  std::string keptBuildDir;  ///< set when a failed build dir was kept
  BuildUsage usage;          ///< peaks, whatever the status
};

/// Asks a running build to stop; thread-safe. The runner notices within
/// BuildRunner::kPollSlice and kills the builder's process group.
class CancelFlag {
 public:
  /// Requests the stop; `status` is what the build reports (kCancelled when
  /// the scheduler cancelled the step, kAborted when the worker shuts down).
  void cancel(StepStatus status = StepStatus::kCancelled) {
    status_.store(static_cast<int>(status));
  }
  /// The requested status, if a stop was requested.
  std::optional<StepStatus> requested() const {
    int s = status_.load();
    if (s < 0) return std::nullopt;
    return static_cast<StepStatus>(s);
  }

 private:
  std::atomic<int> status_{-1};
};

/// Receives the merged stdout/stderr of a builder, chunk by chunk, on the
/// thread that called run().
using LogCallback = std::function<void(std::string_view chunk)>;

/// Builds derivations. Stateless between builds; one run() per thread. A
/// finished build's directory is removed on a thread of the runner's own
/// after run() returned; the destructor waits for those removals.
class BuildRunner {
 public:
  /// Longest wait between checks of the cancel flag and the deadlines.
  static constexpr std::chrono::milliseconds kPollSlice{100};

  /// Runs builders unsandboxed through `launcher`. Borrows `launcher` and
  /// `clock`, which must outlive the runner.
  BuildRunner(BuildRunnerConfig config, ProcessLauncher& launcher,
              const Clock& clock);
  /// Runs builders in `sandbox`. Borrows `sandbox` and `clock`.
  BuildRunner(BuildRunnerConfig config, Sandbox& sandbox, const Clock& clock);

  /// Runs the build to completion. Build failures are reported in the
  /// result (docs/worker.md lists the statuses); throws only when the build
  /// cannot be attempted: an invalid layout (see StoreLayout), an output
  /// without a path, a malformed structured-attrs `__json`, a failing
  /// system call while preparing the build directory, or a sandbox that
  /// cannot be set up (or cannot move the outputs out).
  BuildResult run(const BuildRequest& request, const LogCallback& onLog,
                  const CancelFlag* cancel = nullptr);

 private:
  struct Supervision;
  void checkRunnable(const BuildRequest& request) const;
  PlatformCommand builderCommand(const BuildRequest& request) const;
  std::unique_ptr<ChildProcess> startBuilder(const BuildRequest& request,
                                             const std::string& buildDir,
                                             const PlatformCommand& command,
                                             SandboxedBuild& build,
                                             BuildResult& result);
  void superviseBuilder(ChildProcess& child, const BuildRequest& request,
                        const LogCallback& onLog, const CancelFlag* cancel,
                        LimitWatch& watch, BuildResult& result);
  std::unique_ptr<BuildCgroup> makeCgroup(const BuildRequest& request) const;
  void collectOutputs(const BuildRequest& request, BuildResult& result);
  std::string physicalPath(const store::StorePath& path) const;
  void removeOutputs(const BuildRequest& request) const;

  BuildRunnerConfig config_;
  std::unique_ptr<Sandbox> ownSandbox_;  // set when given a launcher
  Sandbox& sandbox_;
  const Clock& clock_;
  BackgroundRemover remover_;  // finished build directories; last member
};

}  // namespace kiln::worker
