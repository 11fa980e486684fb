#pragma once
// The farm `kiln serve` runs (docs/operations.md, "`kiln serve`"): a
// scheduler child and N local worker children, started from a FarmConfig
// and changed in place when a new one is applied (SIGHUP), plus the
// projects and jobsets it declares, kept in the scheduler's state through
// queued requests.

#include <atomic>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "farm_config.h"
#include "kiln/common/clock.h"
#include "sandbox_options.h"
#include "serve_console.h"
#include "serve_jobsets.h"
#include "serve_supervisor.h"

namespace kiln::cli {

/// What serve runs: the configuration with the command line's overrides
/// applied, and the plugin options only the command line gives.
struct ServeSettings {
  FarmConfig config;
  /// Plugin directories and platform options (command line only); the
  /// sandbox name, options and platforms of the config are merged in by
  /// ServeFarm. `options` here are the command line's, applied last.
  SandboxOptions sandbox;
};

/// The running farm. Not thread-safe: one thread drives it.
class ServeFarm {
 public:
  /// Creates the state and key folders, the CurveZMQ keys and the binary
  /// cache's signing key (kept across runs); starts nothing. `out` receives the progress lines. Throws
  /// Error (SysError) if the state directory cannot be prepared.
  ServeFarm(ServeSettings settings, std::ostream& out);
  /// Stops the children (workers first).
  ~ServeFarm();
  ServeFarm(const ServeFarm&) = delete;
  ServeFarm& operator=(const ServeFarm&) = delete;

  /// Starts the scheduler, waits until it listens, starts the workers,
  /// prints the banner and queues the declared projects and jobsets.
  /// False if `stop` was set first; throws Error (nothing left running)
  /// if an address it needs is taken, or the scheduler exits before it
  /// listens or does not listen within 5 minutes.
  bool start(const std::atomic<bool>& stop);
  /// One turn of the loop: restarts dead children, reports answered
  /// requests, evaluations and the builds' progress (serve_console.h).
  void poll();
  /// Applies `next`: jobsets created, changed or disabled; the scheduler
  /// restarted (its queue is kept in its database) only if its flags or
  /// the allowed worker keys changed; local workers added, removed or
  /// restarted as their count or settings changed. Returns what changed,
  /// one line per change ("" when nothing did). Throws Error if `next`
  /// changes the state directory or the store directory.
  std::string apply(ServeSettings next, const std::atomic<bool>& stop);
  /// Stops every child, printing how each ended.
  void stop();

 private:
  std::vector<std::string> schedulerArgs() const;
  std::vector<std::string> workerArgs(unsigned index) const;
  // The config's plugin_dirs, then the command line's --plugin-dir.
  std::vector<std::string> pluginDirs() const;
  void writeAllowedWorkers() const;
  void makeCacheKey() const;
  void resizeWorkers(std::string& changes);
  bool waitReady(const std::atomic<bool>& stop, bool failFast);
  void printBanner();
  // The declared, enabled jobsets, each marked while its evaluation is
  // awaited.
  std::vector<ServedJobset> servedJobsets() const;

  ServeSettings s_;
  std::ostream& out_;
  /// Times the wait for the scheduler to listen (the process's own clock).
  const Clock& clock_ = RealClock::instance();
  std::string logs_;
  std::vector<std::string> extraPaths_;  // of the config, resolved
  std::unique_ptr<SupervisedChild> sched_;
  std::vector<std::unique_ptr<SupervisedChild>> workers_;
  std::vector<std::vector<std::string>> workerArgs_;  // of the running ones
  std::unique_ptr<JobsetSync> jobsets_;
  std::string webUrl_;  // "http://HOST:PORT", "" without a web
  std::unique_ptr<ServeConsole> console_;
};

/// The sandbox's extra paths a FarmConfig declares: `extraPaths`, then the
/// strings of the attribute `extraPathsAttribute` of `extraPathsFrom` when
/// set, evaluated by `kiln instantiate --eval` (this executable). Throws
/// Error naming the file if that evaluation fails or gives no list of
/// absolute paths.
std::vector<std::string> resolveExtraPaths(const LocalWorkerSettings& w);

}  // namespace kiln::cli
