#include "kiln/worker/build_runner.h"

#include <sys/wait.h>

#include <algorithm>
#include <functional>
#include <map>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/logging.h"
#include "kiln/common/trace.h"
#include "output_scan.h"

namespace kiln::worker {

using std::chrono::milliseconds;

namespace {

std::string seconds(std::chrono::seconds s) {
  return std::to_string(s.count()) + " s";
}

/// The time left until `deadline`, at most `cap`, never negative.
milliseconds until(Clock::TimePoint deadline, Clock::TimePoint now,
                   milliseconds cap) {
  if (deadline <= now) return milliseconds(0);
  return std::min(cap, std::chrono::ceil<milliseconds>(deadline - now));
}

/// A reference cycle between distinct outputs ("out -> dev -> out"), or ""
/// if there is none. Self-references are fine; a cycle could never be
/// registered (each output must be valid before the ones referring to it).
std::string findOutputCycle(const std::vector<BuiltOutputInfo>& outputs) {
  std::map<store::StorePath, const BuiltOutputInfo*> byPath;
  for (auto& o : outputs) byPath[o.path] = &o;
  std::map<const BuiltOutputInfo*, int> state;  // 1 on the stack, 2 done
  std::vector<std::string> stack;
  std::function<std::string(const BuiltOutputInfo*)> visit =
      [&](const BuiltOutputInfo* o) {
        state[o] = 1;
        stack.push_back(o->name);
        for (auto& ref : o->references) {
          auto it = byPath.find(ref);
          if (it == byPath.end() || it->second == o) continue;
          if (state[it->second] == 1) {
            std::string text;
            auto from = std::find(stack.begin(), stack.end(), it->second->name);
            for (; from != stack.end(); ++from) text += *from + " -> ";
            return text + it->second->name;
          }
          if (state[it->second] == 0)
            if (auto c = visit(it->second); !c.empty()) return c;
        }
        stack.pop_back();
        state[o] = 2;
        return std::string();
      };
  for (auto& o : outputs)
    if (state[&o] == 0)
      if (auto c = visit(&o); !c.empty()) return c;
  return "";
}

bool isLimitStatus(StepStatus s) {
  return s == StepStatus::kOutOfMemory ||
         s == StepStatus::kProcessLimitExceeded ||
         s == StepStatus::kDiskLimitExceeded;
}

}  // namespace

BuildRunner::BuildRunner(BuildRunnerConfig config, ProcessLauncher& launcher,
                         const Clock& clock)
    : config_(std::move(config)),
      ownSandbox_(std::make_unique<UnsandboxedLauncher>(launcher)),
      sandbox_(*ownSandbox_),
      clock_(clock) {}

BuildRunner::BuildRunner(BuildRunnerConfig config, Sandbox& sandbox,
                         const Clock& clock)
    : config_(std::move(config)), sandbox_(sandbox), clock_(clock) {}

std::string BuildRunner::physicalPath(const store::StorePath& path) const {
  return config_.store.physical + "/" + path.baseName();
}

void BuildRunner::removeOutputs(const BuildRequest& request) const {
  for (auto& [name, out] : request.drv.outputs)
    if (out.path) deletePath(physicalPath(*out.path));
}

std::unique_ptr<ChildProcess> BuildRunner::startBuilder(
    const BuildRequest& request, const std::string& buildDir,
    const PlatformCommand& command, SandboxedBuild& build,
    BuildResult& result) {
  const auto& logical = config_.store.logical;
  std::string inside = sandbox_.builderBuildDir(buildDir);
  BuildEnvContext ctx{inside, logical.dir(), request.buildCores,
                      config_.impureEnv};
  auto benv = makeBuildEnvironment(logical, request.drv, ctx);
  for (auto& [file, contents] : benv.files)
    writeFile(buildDir + "/" + file, contents);

  ProcessSpec spec;
  spec.program = command.file;
  spec.args = command.argv;
  for (const auto& arg : request.drv.args)
    spec.args.push_back(rewriteOutputPlaceholders(logical, request.drv, arg));
  spec.env = std::move(benv.env);
  spec.workDir = inside;
  spec.umask = 022;
  try {
    return build.start(spec);
  } catch (const SysError& e) {
    result.status = StepStatus::kFailed;
    result.errorMsg = std::string("cannot start the builder: ") + e.what();
    return nullptr;
  }
}

/// What the supervision loop tracks.
struct BuildRunner::Supervision {
  Clock::TimePoint start, lastOutput;
  std::optional<StepStatus> stop;  // why the tree was killed, if it was
  std::string why;
};

void BuildRunner::superviseBuilder(ChildProcess& child,
                                   const BuildRequest& request,
                                   const LogCallback& onLog,
                                   const CancelFlag* cancel, LimitWatch& watch,
                                   BuildResult& result) {
  const auto& lim = request.limits;
  Supervision s;
  s.start = s.lastOutput = clock_.now();
  auto stop = [&](StepStatus status, std::string why) {
    s.stop = status;
    s.why = std::move(why);
    child.killTree();
    watch.killGroup();  // processes that left the builder's process group
  };
  for (;;) {
    auto now = clock_.now();
    auto wait = kPollSlice;
    if (!s.stop) {
      if (auto breach = watch.check()) {
        stop(breach->status, std::move(breach->message));
      } else if (auto c = cancel ? cancel->requested() : std::nullopt) {
        stop(*c, *c == StepStatus::kCancelled ? "build cancelled"
                                              : "build aborted");
      } else if (lim.timeout.count() && now - s.start >= lim.timeout) {
        stop(StepStatus::kTimedOut, "build timed out after " +
                                        seconds(lim.timeout) +
                                        " (total timeout)");
      } else if (lim.maxSilent.count() && now - s.lastOutput >= lim.maxSilent) {
        stop(StepStatus::kTimedOut, "build produced no output for " +
                                        seconds(lim.maxSilent) +
                                        " (maxSilent)");
      } else {
        if (lim.timeout.count()) wait = until(s.start + lim.timeout, now, wait);
        if (lim.maxSilent.count())
          wait = until(s.lastOutput + lim.maxSilent, now, wait);
      }
    }
    auto ev = child.next(wait);
    if (ev.kind == ProcessEvent::Kind::kExited) {
      result.waitStatus = ev.status;
      break;
    }
    if (ev.kind != ProcessEvent::Kind::kOutput) continue;
    if (s.stop == StepStatus::kLogLimitExceeded) continue;  // discard the rest
    s.lastOutput = clock_.now();
    std::string_view data = ev.data;
    bool overLimit =
        lim.logLimitBytes && result.logBytes + data.size() > lim.logLimitBytes;
    if (overLimit) data = data.substr(0, lim.logLimitBytes - result.logBytes);
    if (!data.empty()) {
      result.logBytes += data.size();
      onLog(data);
    }
    if (overLimit)
      stop(StepStatus::kLogLimitExceeded,
           "build log exceeded the limit of " +
               std::to_string(lim.logLimitBytes) + " bytes");
  }
  result.duration = clock_.now() - s.start;
  auto breach = watch.finalCheck(result.usage);
  // A limit the kernel enforced (an OOM kill, a refused fork) shows only
  // in the group's counters; it explains a builder that failed.
  if (!s.stop && breach && result.waitStatus && *result.waitStatus != 0) {
    s.stop = breach->status;
    s.why = std::move(breach->message);
  }
  if (s.stop) {
    result.status = *s.stop;
    result.errorMsg = s.why;
  }
}

std::unique_ptr<BuildCgroup> BuildRunner::makeCgroup(
    const BuildRequest& request) const {
  const auto& r = request.limits.resources;
  if (!config_.cgroups) {
    if (r.memoryMaxBytes || r.pidsMax || r.cpuWeight)
      throw Error(
          "cannot limit the memory, processes or CPU of a build "
          "without control groups (docs/worker.md, \"Limits per "
          "build\")");
    return nullptr;
  }
  return config_.cgroups->create(nextCgroupName(),
                                 {r.memoryMaxBytes, r.pidsMax, r.cpuWeight});
}

void BuildRunner::collectOutputs(const BuildRequest& request,
                                 BuildResult& result) {
  const auto& logical = config_.store.logical;
  auto candidates = request.inputClosure;
  for (auto& [name, out] : request.drv.outputs) candidates.insert(*out.path);
  bool fixed = store::isFixedOutput(request.drv);
  uint64_t total = 0;
  for (auto& [name, out] : request.drv.outputs) {
    auto phys = physicalPath(*out.path);
    if (!pathExists(phys)) {
      result.status = StepStatus::kFailed;
      result.errorMsg = "builder for '" + logical.printPath(request.drvPath) +
                        "' did not produce output '" + name + "' at '" +
                        logical.printPath(*out.path) + "'";
      return;
    }
    ScannedOutput scanned;
    try {
      scanned = scanOutput(phys, candidates, fixed ? &out : nullptr, total,
                           request.limits.outputLimitBytes);
    } catch (const OutputLimitExceeded& e) {
      result.status = StepStatus::kOutputLimitExceeded;
      result.errorMsg = e.what();
      return;
    }
    if (fixed) {
      auto problem = checkFixedOutput(logical, request.drvPath, out, scanned);
      if (!problem.empty()) {
        result.status = StepStatus::kFailed;
        result.errorMsg = problem;
        return;
      }
    }
    result.outputs.push_back({name, *out.path, phys, scanned.narHash,
                              scanned.narSize, std::move(scanned.references)});
  }
  if (auto cycle = findOutputCycle(result.outputs); !cycle.empty()) {
    result.status = StepStatus::kFailed;
    result.errorMsg = "builder for '" + logical.printPath(request.drvPath) +
                      "' made outputs that " +
                      "reference each other in a cycle: " + cycle;
    return;
  }
  result.status = StepStatus::kSuccess;
}

void BuildRunner::checkRunnable(const BuildRequest& request) const {
  const auto& layout = config_.store;
  if (!sandbox_.mapsStore() && !layout.mountedAtLogical &&
      absPath(layout.physical) != absPath(layout.logical.dir()))
    throw Error("cannot run '" + layout.logical.printPath(request.drvPath) +
                "' unsandboxed: the physical store '" + layout.physical +
                "' is not visible at the logical store directory '" +
                layout.logical.dir() +
                "' (use the store at its logical directory or mount it there)");
  for (auto& [name, out] : request.drv.outputs)
    if (!out.path)
      throw Error(
          "cannot build '" + layout.logical.printPath(request.drvPath) +
          "': output '" + name +
          "' has no path (floating or deferred outputs are not supported)");
  if (store::isFixedOutput(request.drv))
    checkFixedOutputSpec(layout.logical, request.drvPath,
                         request.drv.outputs.at("out"));
}

PlatformCommand BuildRunner::builderCommand(const BuildRequest& request) const {
  const auto& drv = request.drv;
  std::string argv0 = baseNameOf(drv.builder);
  if (config_.platforms)
    if (auto cmd = config_.platforms->command(drv.platform, drv.builder, argv0))
      return *cmd;
  return {drv.builder, {argv0}, {}};
}

BuildResult BuildRunner::run(const BuildRequest& request,
                             const LogCallback& onLog,
                             const CancelFlag* cancel) {
  const auto& layout = config_.store;
  checkRunnable(request);
  PlatformCommand command = builderCommand(request);
  removeOutputs(request);  // leftovers of an interrupted build; never valid

  TempDir buildDir("nix-build-" + std::string(request.drvPath.name()),
                   config_.buildDirParent);
  // Before the builder starts; destroyed (killed whole, removed) last.
  auto group = makeCgroup(request);
  SandboxBuildSpec sbs;
  if (group) sbs.cgroupProcs = group->procsFiles();
  sbs.hostBuildDir = buildDir.path();
  sbs.scratchDir = dirNameOf(buildDir.path());
  sbs.logicalStore = layout.logical.dir();
  sbs.physicalStore = layout.physical;
  for (auto& p : request.inputClosure) sbs.inputs.push_back(p.baseName());
  for (auto& [name, out] : request.drv.outputs)
    sbs.outputs.push_back(out.path->baseName());
  sbs.network = store::isFixedOutput(request.drv);
  sbs.extraPaths = command.hostPaths;
  std::string traced(request.drvPath.baseName());
  traceEvent("worker", "sandbox-preparing", 0, traced);
  auto sandboxed = sandbox_.prepare(sbs);

  BuildResult result;
  if (auto child =
          startBuilder(request, buildDir.path(), command, *sandboxed, result)) {
    traceEvent("worker", "builder-started", 0, traced);
    CpuShareHold share(config_.cpuShares.get(), child->pid(), request.rankMs);
    LimitWatch watch(request.limits.resources, group.get(),
                     config_.dirSize.get(), buildDir.path(), clock_);
    superviseBuilder(*child, request, onLog, cancel, watch, result);
    if (isLimitStatus(result.status))  // the log says which limit, too
      onLog("\nkiln: " + result.errorMsg + "\n");
    share.release();  // while the pid is still the builder's
    if (group) group->killAll();  // what left the builder's process group
    child.reset();                // reaps: everything of the build is gone
    traceEvent("worker", "builder-exited", 0, traced);
  }
  sandboxed->finish();
  traceEvent("worker", "sandbox-finished", 0, traced);
  if (result.errorMsg.empty() && result.waitStatus) {
    if (*result.waitStatus == 0) {
      collectOutputs(request, result);
      traceEvent("worker", "outputs-collected", 0, traced);
    } else {
      result.status = StepStatus::kFailed;
      result.errorMsg = "builder for '" +
                        layout.logical.printPath(request.drvPath) + "' " +
                        describeWaitStatus(*result.waitStatus);
    }
  }
  if (result.status != StepStatus::kSuccess) {
    result.outputs.clear();
    removeOutputs(request);
    if (request.keepFailedBuildDir) {
      buildDir.keep();
      result.keptBuildDir = buildDir.path();
    }
  }
  if (result.keptBuildDir.empty()) {
    // Removed off the step's path; ~BuildRunner waits for the removals.
    buildDir.keep();
    remover_.remove(buildDir.path());
  }
  return result;
}

}  // namespace kiln::worker
