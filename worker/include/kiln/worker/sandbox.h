#pragma once
/// Sandboxes as the build runner sees them (docs/worker.md, "Sandboxes"). A
/// sandbox prepares one isolated build at a time: a ProcessLauncher for the
/// builder plus the store-layout mapping (where the builder sees its build
/// directory, whether it sees the physical store at the logical directory,
/// and moving the outputs out afterwards). `PluginSandbox` drives a sandbox
/// plugin through the C ABI (docs/plugin-abi.md); `UnsandboxedLauncher`
/// runs builders through a plain ProcessLauncher (tests and embedding).

#include <memory>
#include <string>
#include <vector>

#include "kiln/common/process.h"
#include "kiln/plugin_host/host_services.h"
#include "kiln/plugin_host/registry.h"

namespace kiln::worker {

/// What a sandbox needs to know about one build besides the process.
struct SandboxBuildSpec {
  std::string hostBuildDir;   ///< the build directory on the host
  std::string scratchDir;     ///< for per-build files (store's file system)
  std::string logicalStore;   ///< e.g. /nix/store
  std::string physicalStore;  ///< holds the inputs; outputs must end here
  std::vector<std::string> inputs;   ///< base names of the input closure
  std::vector<std::string> outputs;  ///< base names of the outputs
  bool network = false;              ///< fixed-output: may use the network
  /// Host files the builder needs besides the closure (a platform's
  /// emulator): shown read-only at the same path.
  std::vector<std::string> extraPaths;
  /// The build's control group: `cgroup.procs` files the builder is
  /// written to before it runs anything (empty: none).
  std::vector<std::string> cgroupProcs;
};

/// One prepared build: start the builder once, then finish().
class SandboxedBuild : public ProcessLauncher {
 public:
  /// After the builder was reaped: moves its outputs into the physical
  /// store and releases the build's resources. Throws Error.
  virtual void finish() = 0;
};

/// A way of isolating builders. Thread-safe: slots prepare builds at once.
class Sandbox {
 public:
  virtual ~Sandbox() = default;
  /// "linux", "none", "unsandboxed".
  virtual std::string name() const = 0;
  /// Builders see the physical store at the logical directory whatever the
  /// layout (else they write the logical paths themselves).
  virtual bool mapsStore() const = 0;
  /// Builds are isolated (namespaces, no network, unprivileged uid).
  virtual bool isolates() const = 0;
  /// The build directory as builders see it.
  virtual std::string builderBuildDir(const std::string& hostBuildDir) = 0;
  /// Prepares one build. Throws Error.
  virtual std::unique_ptr<SandboxedBuild> prepare(
      const SandboxBuildSpec& spec) = 0;
};

/// No isolation: builders start through a plain ProcessLauncher with host
/// paths (tests, embedding: DaemonConfig::launcher).
class UnsandboxedLauncher : public Sandbox {
 public:
  /// Borrows `launcher`, which must outlive this.
  explicit UnsandboxedLauncher(ProcessLauncher& launcher)
      : launcher_(launcher) {}
  /// Shares ownership of `launcher` (not null).
  explicit UnsandboxedLauncher(std::shared_ptr<ProcessLauncher> launcher)
      : owned_(std::move(launcher)), launcher_(*owned_) {}
  std::string name() const override { return "unsandboxed"; }
  bool mapsStore() const override { return false; }
  bool isolates() const override { return false; }
  std::string builderBuildDir(const std::string& dir) override { return dir; }
  std::unique_ptr<SandboxedBuild> prepare(const SandboxBuildSpec&) override;

 private:
  std::shared_ptr<ProcessLauncher> owned_;
  ProcessLauncher& launcher_;
};

/// A sandbox plugin instance.
class PluginSandbox : public Sandbox {
 public:
  /// Creates an instance of `plugin` (a sandbox) with `config`; throws
  /// Error with the plugin's message if it refuses.
  PluginSandbox(const plugins::PluginInfo& plugin,
                plugins::PluginConfig config);
  ~PluginSandbox() override;
  PluginSandbox(const PluginSandbox&) = delete;
  PluginSandbox& operator=(const PluginSandbox&) = delete;

  std::string name() const override { return plugin_.name; }
  bool mapsStore() const override;
  bool isolates() const override;
  std::string builderBuildDir(const std::string& hostBuildDir) override;
  std::unique_ptr<SandboxedBuild> prepare(
      const SandboxBuildSpec& spec) override;
  /// Runs the plugin's probe (ABI 1.1); "" when it can work here (or has
  /// no probe), else the reason it cannot.
  std::string probe();

 private:
  class Build;
  const kiln_sandbox_functions& fns() const;

  plugins::PluginInfo plugin_;
  std::unique_ptr<plugins::HostServices> host_;
  void* instance_ = nullptr;
};

/// Loads sandbox plugin `name` from the process's plugin registry
/// (plugins::processPlugins()) with `config`. Throws Error naming what
/// exists when there is no such plugin.
std::unique_ptr<PluginSandbox> loadSandbox(const std::string& name,
                                           plugins::PluginConfig config = {});

/// The extra paths the `linux` sandbox gets from openSandbox() unless
/// `extra-paths` is configured: the host's shell, tools and libraries,
/// read-only, so that collections using host tools (PATH=/usr/bin:/bin)
/// build.
inline constexpr const char* kDefaultLinuxExtraPaths =
    "/bin /usr/bin /lib /lib64? /usr/lib";

/// The worker's sandbox: loads `name` (as loadSandbox; `linux` gets
/// kDefaultLinuxExtraPaths unless `extra-paths` is set) and probes it.
/// Logs a loud warning for a sandbox that does not isolate. Throws Error
/// when there is no such plugin, it refuses its configuration, or its
/// probe fails (the reason, and what to do).
std::shared_ptr<Sandbox> openSandbox(const std::string& name,
                                     plugins::PluginConfig config);

}  // namespace kiln::worker
