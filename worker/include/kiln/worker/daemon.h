#pragma once
/// The worker daemon (design decision 5, docs/worker.md "Daemon"): connects
/// to the scheduler, announces itself with Hello, runs the BuildSteps it is
/// given in slot threads with BuildRunner, fetches missing inputs into its
/// own LocalStore (a cache) and uploads outputs through the transfer
/// component. All socket work happens on the thread that calls run(); slot
/// threads hand logs and results back through a queue.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/common/error.h"
#include "kiln/common/process.h"
#include "kiln/plugin_host/host_services.h"
#include "kiln/protocol/transport.h"
#include "kiln/worker/cgroups.h"
#include "kiln/worker/cpu_shares.h"
#include "kiln/worker/limit_watch.h"
#include "kiln/worker/pressure.h"

namespace kiln::worker {

/// The scheduler turned this worker away (a Refused message, or its key was
/// rejected during the handshake). `what()` is the scheduler's reason.
class WorkerRefused : public Error {
 public:
  using Error::Error;
};

/// Test-only fault injection (docs/worker.md, "Fault injection"). The
/// defaults inject nothing; `kiln worker` sets these only from its hidden
/// `--debug-*` options, which the integration tests use to make a worker
/// misbehave on purpose.
struct DebugFaults {
  /// When non-zero, every message header carries this protocol version,
  /// as an older or newer worker's would.
  uint16_t protocolVersion = 0;
  /// The first this many output uploads send their first chunk with one
  /// byte flipped (the NAR hash announced stays the true one).
  unsigned corruptUploads = 0;
  /// With direct uploads: the process exits (status 70) right after its
  /// first output is staged, before it says so (a worker killed
  /// mid-upload).
  bool exitAfterStaging = false;
  /// With direct uploads: the process SIGKILLs itself once this many
  /// parts of a multipart upload are up and journaled, before the rest
  /// (a worker killed mid-upload, which resumes once restarted); 0: never.
  unsigned killAfterParts = 0;
};

/// Everything the daemon needs to know.
struct DaemonConfig {
  protocol::ClientOptions client;  ///< where and how to connect
  /// Opens the connection to each scheduler (with `client`'s options and
  /// the endpoint tried). Null: a ZeroMQ protocol::Client.
  protocol::ClientConnector connector;
  /// The schedulers to follow, in order (docs/worker.md, "Fail-over"),
  /// each connected with `client`'s keys and timings; `client.connect` is
  /// then ignored. Empty: `client.connect` alone. With one endpoint the
  /// worker stays with it and ZeroMQ reconnects; with several it moves
  /// round-robin to the next one that does not answer (EndpointList).
  std::vector<std::string> schedulers;
  /// With several `schedulers`: how long one may take to complete the
  /// handshake, and then to answer Hello with Welcome, before the worker
  /// tries the next (one ZeroMQ heartbeat interval).
  std::chrono::milliseconds failoverAfter{5000};
  std::string stateDir;            ///< holds the store, drvs, build dirs
  /// The logical store directory. Unless the sandbox maps paths, builders
  /// write to it directly, so it must be `<stateDir>/store` or have the
  /// physical store mounted on it (`storeMountedAtLogical`).
  std::string storeDir = "/nix/store";
  bool storeMountedAtLogical = false;
  /// Whether outputs and fetched inputs are fsynced file by file into the
  /// worker's store before they are registered
  /// (store::LocalStore::ContentSync); false is Nix's default.
  bool syncStoreFiles = true;
  std::string workerId;  ///< defaults to the host name
  /// The systems announced. Empty: the union of the platforms' systems
  /// (the usual case); set, it is announced as given (the operator's
  /// claim: a system no platform runs is executed as it is).
  std::vector<std::string> systems;
  /// The platform plugins that run builders, in order (docs/worker.md,
  /// "Platforms"): the first that runs a system runs its builders. Loaded
  /// from plugins::processPlugins() when the daemon is constructed.
  std::vector<std::string> platforms{"native", "qemu-user"};
  /// The platforms' options (`qemu-dir` for qemu-user).
  plugins::PluginConfig platformOptions;
  /// Announced as given (`requiredSystemFeatures` a step may ask for).
  std::vector<std::string> supportedFeatures;
  std::vector<std::string> mandatoryFeatures;
  uint32_t slots = 1;
  double speedFactor = 1.0;
  std::string kilnVersion;  ///< sent in Hello
  /// How long to wait for a Welcome before saying Hello again (doubling
  /// up to helloRetryMax).
  std::chrono::milliseconds helloRetryMin{2000};
  std::chrono::milliseconds helloRetryMax{60000};
  DebugFaults debug;  ///< tests only; nothing injected by default
  /// Direct uploads (docs/protocol.md "Direct uploads"): empty, outputs go
  /// over the connection; "zstd" or "xz", the worker asks the scheduler
  /// for presigned URLs, compresses each output with that method and PUTs
  /// it to the farm's object store (over the connection when refused).
  std::string directUploads;
  /// The sandbox plugin that starts the builders (docs/worker.md,
  /// "Sandboxes"): loaded from plugins::processPlugins() and probed when
  /// the daemon is constructed, which throws Error with the reason if it
  /// is missing or cannot run here. Ignored when `launcher` is set.
  std::string sandbox = "linux";
  /// The sandbox's options (`--sandbox-option KEY=VALUE`). For `linux`
  /// without `extra-paths`: kDefaultLinuxExtraPaths.
  plugins::PluginConfig sandboxOptions;
  /// Tests and embedding: starts the builders instead of a sandbox plugin
  /// (unsandboxed unless the launcher isolates them itself; builders
  /// write to the logical store directly). Null: the `sandbox` plugin.
  std::shared_ptr<ProcessLauncher> launcher;
  /// The store-layout mapping of an injected `launcher`: true when it
  /// makes the physical store visible at the logical directory inside the
  /// build, so the worker accepts any store location.
  bool launcherMapsStore = false;
  /// Sets the CPU share of each builder's session (docs/worker.md, "CPU
  /// shares"): with more slots than CPUs, the builds of highest rank get
  /// the CPUs. Null: Linux's autogroup nice where autogroups are on, else
  /// builds share the CPUs evenly.
  std::shared_ptr<SessionNice> sessionNice;
  /// The CPUs the builders share (NIX_BUILD_CORES is this over `slots`;
  /// CPU shares give this many builders full shares). 0: the machine's.
  unsigned cores = 0;
  /// Limits of every build (docs/worker.md, "Limits per build"). Memory,
  /// processes and CPU weight need control groups: the daemon refuses to
  /// start when it sets them and the host offers none.
  ResourceLimits buildLimits;
  /// Set: the worker announces the system feature kBigBuildFeature and
  /// builds requiring it get these limits (0 fields: `buildLimits`').
  std::optional<ResourceLimits> bigBuildLimits;
  /// The builds' control groups. Null: detected on the host
  /// (hostCgroups), unless `useCgroups` is false.
  std::shared_ptr<Cgroups> cgroups;
  bool useCgroups = true;
  /// Announced in Hello: over any of them the scheduler sends this worker
  /// no new step (docs/worker.md, "Pressure").
  protocol::PressureThresholds thresholds;
  /// Memory, CPU and IO pressure and free memory for the heartbeats.
  /// Null: procPressureSource("/proc").
  std::shared_ptr<PressureSource> pressure;
  /// Heartbeats, Hello retries, build deadlines, result times. Not owned;
  /// must outlive the daemon. Null: RealClock::instance().
  const Clock* clock = nullptr;
};

/// The running worker. Construct, then call run() on the thread that will
/// own the socket; stop() may be called from any thread or a signal
/// handler (it only sets a flag).
class Daemon {
 public:
  /// Opens the store under `config.stateDir` and the client socket (to
  /// the first scheduler). Throws Error for an unusable configuration (no
  /// systems, bad layout, a sandbox or platform that cannot be loaded, a
  /// malformed or repeated scheduler endpoint).
  explicit Daemon(DaemonConfig config);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  /// Serves steps until stop() is called; then aborts running builds,
  /// reports them and says Bye. Throws WorkerRefused when the scheduler
  /// refuses the worker (running builds are aborted first).
  void run();
  /// One turn of run()'s loop: waits (at most 20 ms) for a message and
  /// handles it, then the slots' events, the connection's state and the
  /// heartbeat. For tests that drive the daemon from their own thread
  /// (with a fake transport and clock); throws WorkerRefused as run()
  /// does, and the destructor shuts down as run()'s end would.
  void turn();
  /// Asks run() to return soon: wakes its wait at once. Async-signal-safe.
  void stop();
  /// Whether a Welcome was received on the current connection.
  bool welcomed() const { return welcomed_.load(); }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> welcomed_{false};
  int wakeFd_ = -1;  // the loop's eventfd (owned by impl_)
};

}  // namespace kiln::worker
