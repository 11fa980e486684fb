#include "kiln/worker/sandbox.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/logging.h"
#include "plugin_instance.h"

namespace kiln::worker {
namespace {

/// Starts through a plain launcher; nothing to finish.
class UnsandboxedBuild : public SandboxedBuild {
 public:
  UnsandboxedBuild(ProcessLauncher& l, std::vector<std::string> cgroupProcs)
      : launcher_(l), cgroupProcs_(std::move(cgroupProcs)) {}
  std::unique_ptr<ChildProcess> start(const ProcessSpec& spec) override {
    if (cgroupProcs_.empty()) return launcher_.start(spec);
    ProcessSpec joined = spec;
    joined.cgroupProcs = cgroupProcs_;
    return launcher_.start(joined);
  }
  void finish() override {}

 private:
  ProcessLauncher& launcher_;
  std::vector<std::string> cgroupProcs_;
};

/// Throws the kiln error for a plugin's failure: SysError for a failed
/// system call (so "cannot start the builder" cases read as before).
[[noreturn]] void throwPluginError(const std::string& context,
                                   const kiln_error& err) {
  std::string msg = err.message;
  if (err.code == KILN_ERR_SYSTEM && err.sys_errno != 0) {
    std::string suffix = std::string(": ") + std::strerror(err.sys_errno);
    if (msg.size() >= suffix.size() &&
        msg.compare(msg.size() - suffix.size(), suffix.size(), suffix) == 0)
      msg.resize(msg.size() - suffix.size());
    throw SysError(msg, err.sys_errno);
  }
  throw Error(context + msg);
}

/// NULL-terminated arrays of C strings pointing into owned strings.
struct CStrings {
  explicit CStrings(const std::vector<std::string>& in) : s(in) {
    for (auto& x : s) p.push_back(x.c_str());
    p.push_back(nullptr);
  }
  std::vector<std::string> s;
  std::vector<const char*> p;
};

}  // namespace

std::unique_ptr<SandboxedBuild> UnsandboxedLauncher::prepare(
    const SandboxBuildSpec& spec) {
  return std::make_unique<UnsandboxedBuild>(launcher_, spec.cgroupProcs);
}

/// One build of a plugin sandbox.
class PluginSandbox::Build : public SandboxedBuild {
 public:
  Build(PluginSandbox& sandbox, SandboxBuildSpec spec)
      : sandbox_(sandbox), spec_(std::move(spec)) {}
  ~Build() override {
    try {
      finish();
    } catch (const std::exception& e) {
      logWarn("sandbox " + sandbox_.name() + ": " + e.what());
    }
  }
  std::unique_ptr<ChildProcess> start(const ProcessSpec& spec) override;
  void joinGroups(pid_t pid);
  void finish() override {
    if (!handle_) return;
    kiln_error err{};
    void* h = handle_;
    handle_ = nullptr;
    if (sandbox_.fns().finish(sandbox_.instance_, h, &err) != KILN_OK)
      throwPluginError("sandbox " + sandbox_.name() + ": ", err);
  }

 private:
  PluginSandbox& sandbox_;
  SandboxBuildSpec spec_;
  void* handle_ = nullptr;
};

std::unique_ptr<ChildProcess> PluginSandbox::Build::start(
    const ProcessSpec& ps) {
  if (handle_) throw Error("a sandboxed build starts one builder");
  std::vector<std::string> args = ps.args, env;
  if (args.empty()) args.push_back(ps.program);
  for (auto& [k, v] : ps.env) env.push_back(k + "=" + v);
  CStrings argv(args), envp(env), inputs(spec_.inputs), outputs(spec_.outputs),
      extra(spec_.extraPaths), groups(spec_.cgroupProcs);
  kiln_sandbox_spec s{};
  s.size = sizeof s;
  s.program = ps.program.c_str();
  s.argv = argv.p.data();
  s.envp = envp.p.data();
  s.work_dir = ps.workDir.empty() ? nullptr : ps.workDir.c_str();
  s.umask = ps.umask.value_or(022);
  s.host_build_dir = spec_.hostBuildDir.c_str();
  s.scratch_dir = spec_.scratchDir.c_str();
  s.logical_store = spec_.logicalStore.c_str();
  s.physical_store = spec_.physicalStore.c_str();
  s.inputs = inputs.p.data();
  s.outputs = outputs.p.data();
  s.network = spec_.network ? 1 : 0;
  s.extra_paths = extra.p.data();
  s.cgroup_procs = groups.p.data();
  kiln_sandbox_process proc{};
  proc.size = sizeof proc;
  kiln_error err{};
  if (sandbox_.fns().start(sandbox_.instance_, &s, &handle_, &proc, &err) !=
      KILN_OK)
    throwPluginError("sandbox " + sandbox_.name() + ": ", err);
  auto child = std::make_unique<Process>(proc.pid, AutoCloseFD(proc.output_fd));
  if (sandbox_.plugin_.abiMinor < 5) joinGroups(proc.pid);
  return child;
}

void PluginSandbox::Build::joinGroups(pid_t pid) {
  // A plugin older than ABI 1.5 does not know cgroup_procs: the builder
  // joins once it runs (what it started meanwhile stays outside).
  for (auto& file : spec_.cgroupProcs) {
    AutoCloseFD fd(::open(file.c_str(), O_WRONLY | O_CLOEXEC));
    std::string text = std::to_string(pid);
    if (!fd || ::write(fd.get(), text.data(), text.size()) < 0)
      logWarn("cannot move builder " + text + " to " + file + ": " +
              std::strerror(errno));
  }
}

PluginSandbox::PluginSandbox(const plugins::PluginInfo& plugin,
                             plugins::PluginConfig config)
    : plugin_(plugin) {
  // fns() may be read only once the kind is checked.
  auto create = plugin.kind == KILN_PLUGIN_SANDBOX ? fns().create : nullptr;
  host_ = createPluginInstance(plugin, KILN_PLUGIN_SANDBOX, create,
                               std::move(config), &instance_);
}

PluginSandbox::~PluginSandbox() { fns().destroy(instance_); }

const kiln_sandbox_functions& PluginSandbox::fns() const {
  return *static_cast<const kiln_sandbox_functions*>(plugin_.functions);
}

bool PluginSandbox::mapsStore() const {
  return fns().capabilities & KILN_SANDBOX_MAPS_STORE;
}

bool PluginSandbox::isolates() const {
  return fns().capabilities & KILN_SANDBOX_ISOLATES;
}

std::string PluginSandbox::builderBuildDir(const std::string& hostBuildDir) {
  char buf[4096];
  kiln_error err{};
  if (fns().build_dir(instance_, hostBuildDir.c_str(), buf, sizeof buf, &err) !=
      KILN_OK)
    throwPluginError("sandbox " + name() + ": ", err);
  return buf;
}

std::unique_ptr<SandboxedBuild> PluginSandbox::prepare(
    const SandboxBuildSpec& spec) {
  return std::make_unique<Build>(*this, spec);
}

std::string PluginSandbox::probe() {
  if (plugin_.functionsSize <
      offsetof(kiln_sandbox_functions, probe) + sizeof(void*))
    return "";  // built against ABI 1.0: no probe
  if (!fns().probe) return "";
  kiln_error err{};
  if (fns().probe(instance_, &err) == KILN_OK) return "";
  return err.message;
}

std::unique_ptr<PluginSandbox> loadSandbox(const std::string& name,
                                           plugins::PluginConfig config) {
  auto& plugin = plugins::processPlugins().require(KILN_PLUGIN_SANDBOX, name);
  return std::make_unique<PluginSandbox>(plugin, std::move(config));
}

std::shared_ptr<Sandbox> openSandbox(const std::string& name,
                                     plugins::PluginConfig config) {
  if (name == "linux" && !config.count("extra-paths"))
    config["extra-paths"] = kDefaultLinuxExtraPaths;
  std::shared_ptr<PluginSandbox> sandbox = loadSandbox(name, std::move(config));
  if (auto why = sandbox->probe(); !why.empty())
    throw Error("the " + name + " sandbox cannot run on this host: " + why +
                " (use a host with user namespaces, or --sandbox none for "
                "development only)");
  if (!sandbox->isolates())
    logWarn("WARNING: the '" + name +
            "' sandbox does not isolate builds: builders run as this user "
            "with the host's files and network. Development only.");
  return sandbox;
}

}  // namespace kiln::worker
