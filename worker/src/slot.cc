// Slot work for one step: build, register outputs, prepare NARs.
#include "slot.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <set>

#include "kiln/common/logging.h"
#include "kiln/common/trace.h"
#include "kiln/store/nar.h"

namespace kiln::worker {
namespace {

using protocol::StepStatus;

// The NAR of `physical` in an unlinked temporary file, rewound.
AutoCloseFD dumpToTemp(const std::string& physical, const std::string& dir) {
  auto fd = openUnlinkedTemp(dir);
  FdSink sink(fd.get());
  store::dumpPath(physical, sink);
  sink.flush();
  if (lseek(fd.get(), 0, SEEK_SET) < 0) throwSysError("lseek in " + dir);
  return fd;
}

// Outputs in an order where an output's references to sibling outputs come
// first (Nix forbids cycles between outputs).
std::vector<const BuiltOutputInfo*> referencesFirst(
    const std::vector<BuiltOutputInfo>& outs) {
  std::vector<const BuiltOutputInfo*> order;
  std::set<store::StorePath> done;
  while (order.size() < outs.size()) {
    size_t before = order.size();
    for (auto& o : outs) {
      if (done.count(o.path)) continue;
      bool ready = true;
      for (auto& r : o.references)
        if (r != o.path && !done.count(r))
          for (auto& s : outs) ready = ready && s.path != r;
      if (!ready) continue;
      order.push_back(&o);
      done.insert(o.path);
    }
    if (order.size() == before)
      throw Error("outputs of the build refer to each other in a cycle");
  }
  return order;
}

// Moves each built output into the store as a registered path, in place
// (LocalStore adopts the tree: it is checked against the hash and size the
// runner computed, on a NAR dumped from it, and neither copied nor
// restored), all in one transaction, and keeps each NAR for the upload.
std::vector<PreparedOutput> registerOutputs(const BuildRequest& request,
                                            const BuildResult& built,
                                            store::LocalStore& store,
                                            const std::string& tmpDir) {
  auto order = referencesFirst(built.outputs);
  std::vector<store::ValidPathInfo> infos;
  store::LocalStore::Batch batch(store,
                                 store::LocalStore::Batch::Sync::kEachFile);
  for (auto* o : order) {
    store::ValidPathInfo info(o->path);
    info.narHash = o->narHash;
    info.narSize = o->narSize;
    info.references = o->references;
    info.deriver = request.drvPath;
    info.ultimate = true;
    batch.adoptTree(info, o->physicalPath);
    infos.push_back(std::move(info));
  }
  batch.commit();
  std::vector<PreparedOutput> out;
  for (size_t i = 0; i < infos.size(); ++i)
    out.push_back({order[i]->name, protocol::toPathInfo(infos[i]),
                   dumpToTemp(store.physicalPath(infos[i].path), tmpDir)});
  return out;
}

// Every output is already valid here: upload it without building.
std::optional<std::vector<PreparedOutput>> reuseOutputs(
    const BuildRequest& request, store::LocalStore& store,
    const std::string& tmpDir) {
  std::vector<PreparedOutput> out;
  for (auto& [name, o] : request.drv.outputs) {
    if (!o.path) return std::nullopt;
    auto info = store.queryPathInfo(*o.path);
    if (!info) return std::nullopt;
    out.push_back({name, protocol::toPathInfo(*info),
                   dumpToTemp(store.physicalPath(*o.path), tmpDir)});
  }
  return out;
}

// A reproducibility check's build (BuildStep::check): built as usual, but
// its outputs are never registered here. Their NARs go to the upload and
// the trees are removed, so the worker's store never holds outputs other
// than the farm's. The outputs must not be valid here (the builder writes
// to their paths).
std::vector<PreparedOutput> checkOutputs(const BuildRequest& request,
                                         const BuildResult& built,
                                         const std::string& tmpDir) {
  std::vector<PreparedOutput> out;
  for (auto& o : built.outputs) {
    store::ValidPathInfo info(o.path);
    info.narHash = o.narHash;
    info.narSize = o.narSize;
    info.references = o.references;
    info.deriver = request.drvPath;
    out.push_back({o.name, protocol::toPathInfo(info),
                   dumpToTemp(o.physicalPath, tmpDir)});
  }
  for (auto& o : built.outputs) deletePath(o.physicalPath);
  return out;
}

// A check build this worker cannot run (it holds an output).
struct CheckRefused : Error {
  using Error::Error;
};

void refuseHeldOutputs(const BuildRequest& request, store::LocalStore& store,
                       bool check) {
  for (auto& [name, o] : request.drv.outputs) {
    if (!o.path || !store.isValid(*o.path)) continue;
    std::string path = store.printPath(*o.path);
    if (check)
      throw CheckRefused("output " + path +
                         " is valid in this worker's store: a check build "
                         "needs a worker without it");
    throw Error("output " + path +
                " is already valid in the worker's store but other "
                "outputs are missing");
  }
}

}  // namespace

std::vector<PreparedOutput> prepareAgain(
    const std::vector<protocol::BuiltOutput>& outputs, store::LocalStore& store,
    const std::string& tmpDir) {
  std::vector<PreparedOutput> out;
  for (auto& o : outputs)
    out.push_back(
        {o.name, o.info, dumpToTemp(store.physicalPath(o.info.path), tmpDir)});
  return out;
}

AutoCloseFD openUnlinkedTemp(const std::string& dir) {
  AutoCloseFD fd(open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd) throwSysError("creating a temporary file in " + dir);
  return fd;
}

SlotOutcome runSlot(const BuildRequest& request, uint64_t stepId,
                    BuildRunner& runner, store::LocalStore& store,
                    const std::string& tmpDir, const LogCallback& onLog,
                    const CancelFlag& cancel, const Clock& clock, bool check) {
  SlotOutcome res;
  res.result.stepId = stepId;
  res.result.startTimeMs = clock.nowMs();
  try {
    std::optional<std::vector<PreparedOutput>> reused;
    if (!check) reused = reuseOutputs(request, store, tmpDir);
    if (reused) {
      res.outputs = std::move(*reused);
      res.result.status = StepStatus::kSuccess;
    } else {
      refuseHeldOutputs(request, store, check);
      auto built = runner.run(request, onLog, &cancel);
      res.result.status = built.status;
      res.result.errorMsg = built.errorMsg;
      res.result.peakMemoryBytes = built.usage.peakMemoryBytes;
      res.result.cpuTimeUs = built.usage.cpuTimeUs;
      res.result.buildDirBytes = built.usage.buildDirBytes;
      traceEvent("worker", "build-returned", stepId);
      if (built.status == StepStatus::kSuccess)
        res.outputs = check ? checkOutputs(request, built, tmpDir)
                            : registerOutputs(request, built, store, tmpDir);
      traceEvent("worker", "outputs-stored", stepId);
    }
  } catch (const CheckRefused& e) {
    res.outputs.clear();
    res.result.status = StepStatus::kAborted;
    res.result.errorMsg = std::string(protocol::kCheckRefusedPrefix) + e.what();
    logInfo("step " + std::to_string(stepId) + ": " + res.result.errorMsg);
  } catch (const std::exception& e) {
    res.outputs.clear();
    res.result.status = StepStatus::kAborted;
    res.result.errorMsg = std::string("worker error: ") + e.what();
    logError("step " + std::to_string(stepId) + ": " + res.result.errorMsg);
  }
  res.result.stopTimeMs = std::max(clock.nowMs(), res.result.startTimeMs);
  return res;
}

}  // namespace kiln::worker
