// Body encoding of each message type: put() writes the fields, get() reads
// them back, check() validates the values (called on both sides so that an
// invalid message is neither sent nor accepted).
#include "body_codec.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "wire.h"

namespace kiln::protocol::codec {

using wire::Reader;
using wire::Writer;

// ---- shared pieces ----------------------------------------------------------

// An optional value: a u8 0/1, then the value when present.
void putOpt(Writer& w, const std::optional<double>& v) {
  w.boolean(v.has_value());
  if (v) w.f64(*v);
}
void putOpt(Writer& w, const std::optional<uint64_t>& v) {
  w.boolean(v.has_value());
  if (v) w.u64(*v);
}
std::optional<double> getOptF64(Reader& r, const char* field) {
  if (!r.boolean(field)) return std::nullopt;
  return r.f64(field);
}
std::optional<uint64_t> getOptU64(Reader& r, const char* field) {
  if (!r.boolean(field)) return std::nullopt;
  return r.u64(field);
}
void requirePercent(const Check& c, const std::optional<double>& v,
                    const char* field) {
  c.require(!v || (std::isfinite(*v) && *v >= 0 && *v <= 100), field,
            "must be a percentage, 0..100");
}

store::StorePath getPath(Reader& r, const char* field) {
  auto s = r.str(field, store::StorePath::kHashLen + 1 + 211);
  try {
    return store::StorePath(s);
  } catch (const FormatError& e) {
    r.fail(field, e.what());
  }
}

void putInfo(Writer& w, const PathInfo& p) {
  w.str(p.path.baseName());
  w.hash(p.narHash);
  w.u64(p.narSize);
  w.u32(static_cast<uint32_t>(p.references.size()));
  for (auto& ref : p.references) w.str(ref.baseName());
  w.boolean(p.deriver.has_value());
  if (p.deriver) w.str(p.deriver->baseName());
}

PathInfo getInfo(Reader& r) {
  PathInfo p;
  p.path = getPath(r, "path");
  p.narHash = r.hash("narHash");
  if (p.narHash.algo() != HashAlgo::kSha256)
    r.fail("narHash", "must be sha256");
  p.narSize = r.u64("narSize");
  auto n = r.count("references", kMaxRefs, 4);
  for (uint32_t i = 0; i < n; ++i)
    if (!p.references.insert(getPath(r, "references")).second)
      r.fail("references", "duplicate reference");
  if (r.boolean("hasDeriver")) p.deriver = getPath(r, "deriver");
  return p;
}

void checkInfo(const Check& c, const PathInfo& p) {
  c.require(p.narHash.algo() == HashAlgo::kSha256, "narHash", "must be sha256");
  c.require(p.narSize > 0, "narSize", "must be > 0 (a NAR is never empty)");
  c.require(p.references.size() <= kMaxRefs, "references", "too many");
}

void putStrings(Writer& w, const std::vector<std::string>& v) {
  w.u32(static_cast<uint32_t>(v.size()));
  for (auto& s : v) w.str(s);
}

std::vector<std::string> getStrings(Reader& r, const char* field, uint32_t max,
                                    size_t maxLen) {
  std::vector<std::string> v(r.count(field, max, 4));
  for (auto& s : v) s = r.str(field, maxLen);
  return v;
}

namespace {

void putTransfer(Writer& w, const TransferHeader& t) {
  w.u64(t.transferId);
  w.u64(t.stepId);
  w.str(t.outputName);
  putInfo(w, t.info);
}

void getTransfer(Reader& r, TransferHeader& t) {
  t.transferId = r.u64("transferId");
  t.stepId = r.u64("stepId");
  t.outputName = r.str("outputName", 211);
  t.info = getInfo(r);
}

void checkTransfer(const Check& c, const TransferHeader& t, bool upload) {
  c.require(t.transferId != 0, "transferId", "must not be 0");
  if (upload)
    c.ident(t.outputName, "outputName", "+-._?=", 211);
  else
    c.require(t.outputName.empty(), "outputName", "must be empty for PathData");
  checkInfo(c, t.info);
}

}  // namespace

// ---- per message
// --------------------------------------------------------------

void check(const Hello& m) {
  Check c{"Hello"};
  c.ident(m.workerId, "workerId", "._@:-");
  c.require(m.protocolVersion == kProtocolVersion, "protocolVersion",
            "says " + std::to_string(m.protocolVersion) +
                " but the header says " + std::to_string(kProtocolVersion));
  c.require(m.storeDir.size() <= 4096 && m.storeDir.starts_with('/') &&
                m.storeDir.find('\0') == std::string::npos,
            "storeDir", "must be an absolute path");
  c.require(!m.systems.empty() && m.systems.size() <= kMaxSystems, "systems",
            "must list 1.." + std::to_string(kMaxSystems) + " systems");
  for (auto& s : m.systems) c.ident(s, "systems", "_.-", 64);
  c.require(m.supportedFeatures.size() <= kMaxFeatures, "supportedFeatures",
            "too many");
  c.require(m.mandatoryFeatures.size() <= kMaxFeatures, "mandatoryFeatures",
            "too many");
  for (auto& f : m.supportedFeatures) c.ident(f, "supportedFeatures", "_.+-");
  for (auto& f : m.mandatoryFeatures) {
    c.ident(f, "mandatoryFeatures", "_.+-");
    c.require(std::find(m.supportedFeatures.begin(), m.supportedFeatures.end(),
                        f) != m.supportedFeatures.end(),
              "mandatoryFeatures", "'" + f + "' is not a supported feature");
  }
  c.require(m.slots >= 1 && m.slots <= kMaxSlots, "slots",
            "must be 1.." + std::to_string(kMaxSlots) + ", got " +
                std::to_string(m.slots));
  c.require(
      std::isfinite(m.speedFactor) && m.speedFactor > 0 && m.speedFactor <= 1e6,
      "speedFactor", "must be a positive number");
  c.require(m.kilnVersion.size() <= kMaxIdent, "kilnVersion", "too long");
  c.require(m.heldSteps.size() <= kMaxSlots, "heldSteps", "too many");
  std::vector<uint64_t> ids;
  for (auto& h : m.heldSteps) {
    c.require(h.drvPath.isDerivation(), "heldSteps", "does not end in .drv");
    ids.push_back(h.stepId);
  }
  std::sort(ids.begin(), ids.end());
  c.require(std::adjacent_find(ids.begin(), ids.end()) == ids.end(),
            "heldSteps", "a step is listed twice");
  const PressureThresholds& t = m.thresholds;
  c.require(!t.maxLoadAverage ||
                (std::isfinite(*t.maxLoadAverage) && *t.maxLoadAverage > 0),
            "thresholds.maxLoadAverage", "must be a positive number");
  requirePercent(c, t.maxMemoryPressure, "thresholds.maxMemoryPressure");
  requirePercent(c, t.maxCpuPressure, "thresholds.maxCpuPressure");
  requirePercent(c, t.maxIoPressure, "thresholds.maxIoPressure");
}

void put(Writer& w, const Hello& m) {
  w.str(m.workerId);
  w.u32(m.protocolVersion);
  w.str(m.storeDir);
  putStrings(w, m.systems);
  putStrings(w, m.supportedFeatures);
  putStrings(w, m.mandatoryFeatures);
  w.u32(m.slots);
  w.f64(m.speedFactor);
  w.u64(m.storePathCount);
  w.str(m.kilnVersion);
  w.u32(static_cast<uint32_t>(m.heldSteps.size()));
  for (auto& h : m.heldSteps) {
    w.u64(h.stepId);
    w.str(h.drvPath.baseName());
    w.boolean(h.resultReady);
  }
  // Without thresholds the body is the one of a worker before them.
  if (m.thresholds == PressureThresholds{}) return;
  putOpt(w, m.thresholds.maxLoadAverage);
  putOpt(w, m.thresholds.maxMemoryPressure);
  putOpt(w, m.thresholds.maxCpuPressure);
  putOpt(w, m.thresholds.maxIoPressure);
  putOpt(w, m.thresholds.minFreeDiskBytes);
}

void get(Reader& r, Hello& m) {
  m.workerId = r.str("workerId", kMaxIdent);
  m.protocolVersion = r.u32("protocolVersion");
  m.storeDir = r.str("storeDir", 4096);
  m.systems = getStrings(r, "systems", kMaxSystems, 64);
  m.supportedFeatures =
      getStrings(r, "supportedFeatures", kMaxFeatures, kMaxIdent);
  m.mandatoryFeatures =
      getStrings(r, "mandatoryFeatures", kMaxFeatures, kMaxIdent);
  m.slots = r.u32("slots");
  m.speedFactor = r.f64("speedFactor");
  m.storePathCount = r.u64("storePathCount");
  m.kilnVersion = r.str("kilnVersion", kMaxIdent);
  m.heldSteps.resize(r.count("heldSteps", kMaxSlots, 13));
  for (auto& h : m.heldSteps) {
    h.stepId = r.u64("heldSteps");
    h.drvPath = getPath(r, "heldSteps");
    h.resultReady = r.boolean("heldSteps");
  }
  if (r.atEnd()) return;  // thresholds are optional
  PressureThresholds& t = m.thresholds;
  t.maxLoadAverage = getOptF64(r, "thresholds.maxLoadAverage");
  t.maxMemoryPressure = getOptF64(r, "thresholds.maxMemoryPressure");
  t.maxCpuPressure = getOptF64(r, "thresholds.maxCpuPressure");
  t.maxIoPressure = getOptF64(r, "thresholds.maxIoPressure");
  t.minFreeDiskBytes = getOptU64(r, "thresholds.minFreeDiskBytes");
}

void check(const Welcome& m) {
  Check c{"Welcome"};
  c.ident(m.schedulerId, "schedulerId", "._@:-");
  c.require(m.heartbeatIntervalMs >= 1 && m.heartbeatIntervalMs <= 3600000,
            "heartbeatIntervalMs", "must be 1..3600000");
  c.require(m.chunkSize >= 1 && m.chunkSize <= kMaxDataFrame, "chunkSize",
            "must be 1.." + std::to_string(kMaxDataFrame));
  c.require(m.adoptedSteps.size() <= kMaxSlots, "adoptedSteps", "too many");
}
void put(Writer& w, const Welcome& m) {
  w.str(m.schedulerId);
  w.u32(m.heartbeatIntervalMs);
  w.u32(m.chunkSize);
  w.u32(static_cast<uint32_t>(m.adoptedSteps.size()));
  for (auto id : m.adoptedSteps) w.u64(id);
}
void get(Reader& r, Welcome& m) {
  m.schedulerId = r.str("schedulerId", kMaxIdent);
  m.heartbeatIntervalMs = r.u32("heartbeatIntervalMs");
  m.chunkSize = r.u32("chunkSize");
  m.adoptedSteps.resize(r.count("adoptedSteps", kMaxSlots, 8));
  for (auto& id : m.adoptedSteps) id = r.u64("adoptedSteps");
}

void check(const Refused& m) { Check{"Refused"}.text(m.reason, "reason"); }
void put(Writer& w, const Refused& m) {
  w.u32(m.schedulerVersion);
  w.str(m.reason);
}
void get(Reader& r, Refused& m) {
  m.schedulerVersion = r.u32("schedulerVersion");
  m.reason = r.str("reason", kMaxText);
}

void check(const Heartbeat& m) {
  Check c{"Heartbeat"};
  c.require(std::isfinite(m.load) && m.load >= 0, "load",
            "must be finite and >= 0");
  c.require(m.runningSteps.size() <= kMaxSlots, "runningSteps", "too many");
  requirePercent(c, m.memoryPressure, "memoryPressure");
  requirePercent(c, m.cpuPressure, "cpuPressure");
  requirePercent(c, m.ioPressure, "ioPressure");
}
void put(Writer& w, const Heartbeat& m) {
  w.f64(m.load);
  w.u64(m.freeDiskBytes);
  w.u32(static_cast<uint32_t>(m.runningSteps.size()));
  for (auto id : m.runningSteps) w.u64(id);
  if (!m.memoryPressure && !m.cpuPressure && !m.ioPressure &&
      !m.freeMemoryBytes)
    return;  // the body of a worker before these fields
  putOpt(w, m.memoryPressure);
  putOpt(w, m.cpuPressure);
  putOpt(w, m.ioPressure);
  putOpt(w, m.freeMemoryBytes);
}
void get(Reader& r, Heartbeat& m) {
  m.load = r.f64("load");
  m.freeDiskBytes = r.u64("freeDiskBytes");
  m.runningSteps.resize(r.count("runningSteps", kMaxSlots, 8));
  for (auto& id : m.runningSteps) id = r.u64("runningSteps");
  if (r.atEnd()) return;  // the machine's figures are optional
  m.memoryPressure = getOptF64(r, "memoryPressure");
  m.cpuPressure = getOptF64(r, "cpuPressure");
  m.ioPressure = getOptF64(r, "ioPressure");
  m.freeMemoryBytes = getOptU64(r, "freeMemoryBytes");
}

void check(const BuildStep& m) {
  Check c{"BuildStep"};
  c.require(m.drvPath.isDerivation(), "drvPath", "does not end in .drv");
  c.require(!m.drv.empty() && m.drv.size() <= kMaxDrvSize, "drv",
            "must be 1.." + std::to_string(kMaxDrvSize) + " bytes");
  c.require(m.roots.size() <= kMaxPaths, "roots", "too many");
  c.require(m.inputs.size() <= kMaxPaths, "inputs", "too many");
  for (auto& i : m.inputs) checkInfo(c, i);
  c.require(m.timeoutSec > 0 && m.maxSilentSec > 0, "timeoutSec",
            "timeouts must be > 0");
  c.require(m.rankMs <= kMaxRankMs, "rankMs",
            "must be ≤ " + std::to_string(kMaxRankMs));
}
void put(Writer& w, const BuildStep& m) {
  w.u64(m.stepId);
  w.str(m.drvPath.baseName());
  w.str(m.drv);
  w.u32(static_cast<uint32_t>(m.roots.size()));
  for (auto& p : m.roots) w.str(p.baseName());
  w.u32(static_cast<uint32_t>(m.inputs.size()));
  for (auto& i : m.inputs) putInfo(w, i);
  w.u64(m.maxSilentSec);
  w.u64(m.timeoutSec);
  w.u64(m.logLimitBytes);
  w.u64(m.outputLimitBytes);
  w.u64(m.rankMs);
  w.boolean(m.check);
}
void get(Reader& r, BuildStep& m) {
  m.stepId = r.u64("stepId");
  m.drvPath = getPath(r, "drvPath");
  m.drv = r.str("drv", kMaxDrvSize);
  auto roots = r.count("roots", kMaxPaths, 4);
  m.roots.reserve(roots);
  for (uint32_t i = 0; i < roots; ++i) m.roots.push_back(getPath(r, "roots"));
  auto n = r.count("inputs", kMaxPaths, 40);
  m.inputs.reserve(n);
  for (uint32_t i = 0; i < n; ++i) m.inputs.push_back(getInfo(r));
  m.maxSilentSec = r.u64("maxSilentSec");
  m.timeoutSec = r.u64("timeoutSec");
  m.logLimitBytes = r.u64("logLimitBytes");
  m.outputLimitBytes = r.u64("outputLimitBytes");
  m.rankMs = r.u64("rankMs");
  if (r.atEnd()) return;  // check is optional
  m.check = r.boolean("check");
}

void check(const NeedPaths& m) {
  Check{"NeedPaths"}.require(
      !m.paths.empty() && m.paths.size() <= kMaxPaths, "paths",
      "must list 1.." + std::to_string(kMaxPaths) + " paths");
}
void put(Writer& w, const NeedPaths& m) {
  w.u64(m.stepId);
  w.u32(static_cast<uint32_t>(m.paths.size()));
  for (auto& p : m.paths) w.str(p.baseName());
}
void get(Reader& r, NeedPaths& m) {
  m.stepId = r.u64("stepId");
  auto n = r.count("paths", kMaxPaths, 4);
  m.paths.reserve(n);
  for (uint32_t i = 0; i < n; ++i) m.paths.push_back(getPath(r, "paths"));
}

void check(const PathData& m) { checkTransfer(Check{"PathData"}, m, false); }
void put(Writer& w, const PathData& m) { putTransfer(w, m); }
void get(Reader& r, PathData& m) { getTransfer(r, m); }

void check(const UploadOutput& m) {
  checkTransfer(Check{"UploadOutput"}, m, true);
}
void put(Writer& w, const UploadOutput& m) { putTransfer(w, m); }
void get(Reader& r, UploadOutput& m) { getTransfer(r, m); }

void check(const Credit& m) {
  Check c{"Credit"};
  c.require(m.transferId != 0, "transferId", "must not be 0");
  c.require(m.chunks >= 1 && m.chunks <= 65536, "chunks", "must be 1..65536");
}
void put(Writer& w, const Credit& m) {
  w.u64(m.transferId);
  w.u32(m.chunks);
}
void get(Reader& r, Credit& m) {
  m.transferId = r.u64("transferId");
  m.chunks = r.u32("chunks");
}

void check(const Chunk& m) {
  Check c{"Chunk"};
  c.require(m.transferId != 0, "transferId", "must not be 0");
  c.require(!m.data.empty() && m.data.size() <= kMaxDataFrame, "data",
            "must be 1.." + std::to_string(kMaxDataFrame) + " bytes, got " +
                std::to_string(m.data.size()));
}
void put(Writer& w, const Chunk& m) {
  w.u64(m.transferId);
  w.u64(m.seq);
}
void get(Reader& r, Chunk& m) {
  m.transferId = r.u64("transferId");
  m.seq = r.u64("seq");
}

void check(const TransferAbort& m) {
  Check c{"TransferAbort"};
  c.require(m.transferId != 0, "transferId", "must not be 0");
  c.text(m.reason, "reason");
}
void put(Writer& w, const TransferAbort& m) {
  w.u64(m.transferId);
  w.str(m.reason);
}
void get(Reader& r, TransferAbort& m) {
  m.transferId = r.u64("transferId");
  m.reason = r.str("reason", kMaxText);
}

void check(const LogChunk& m) {
  Check{"LogChunk"}.require(
      m.data.size() <= kMaxDataFrame, "data",
      "longer than " + std::to_string(kMaxDataFrame) + " bytes");
}
void put(Writer& w, const LogChunk& m) { w.u64(m.stepId); }
void get(Reader& r, LogChunk& m) { m.stepId = r.u64("stepId"); }

void check(const StepResult& m) {
  Check c{"StepResult"};
  c.require(isValidStepStatus(static_cast<uint8_t>(m.status)), "status",
            "unknown status " + std::to_string(static_cast<int>(m.status)));
  c.text(m.errorMsg, "errorMsg");
  c.require(m.outputs.size() <= kMaxOutputs, "outputs", "too many");
  for (auto& o : m.outputs) {
    c.ident(o.name, "outputs.name", "+-._?=", 211);
    checkInfo(c, o.info);
  }
  c.require(m.stopTimeMs >= m.startTimeMs, "stopTimeMs",
            "is before startTimeMs");
}
void put(Writer& w, const StepResult& m) {
  w.u64(m.stepId);
  w.u8(static_cast<uint8_t>(m.status));
  w.str(m.errorMsg);
  w.u32(static_cast<uint32_t>(m.outputs.size()));
  for (auto& o : m.outputs) {
    w.str(o.name);
    putInfo(w, o.info);
  }
  w.i64(m.startTimeMs);
  w.i64(m.stopTimeMs);
  w.u64(m.peakMemoryBytes);
  w.u64(m.cpuTimeUs);
  w.u64(m.buildDirBytes);
}
void get(Reader& r, StepResult& m) {
  m.stepId = r.u64("stepId");
  m.status = static_cast<StepStatus>(r.u8("status"));
  m.errorMsg = r.str("errorMsg", kMaxText);
  m.outputs.resize(r.count("outputs", kMaxOutputs, 44));
  for (auto& o : m.outputs) {
    o.name = r.str("outputs.name", 211);
    o.info = getInfo(r);
  }
  m.startTimeMs = r.i64("startTimeMs");
  m.stopTimeMs = r.i64("stopTimeMs");
  if (r.atEnd()) return;  // usage fields are optional
  m.peakMemoryBytes = r.u64("peakMemoryBytes");
  m.cpuTimeUs = r.u64("cpuTimeUs");
  m.buildDirBytes = r.u64("buildDirBytes");
}

void check(const CancelStep& m) {
  Check{"CancelStep"}.text(m.reason, "reason");
}
void put(Writer& w, const CancelStep& m) {
  w.u64(m.stepId);
  w.str(m.reason);
}
void get(Reader& r, CancelStep& m) {
  m.stepId = r.u64("stepId");
  m.reason = r.str("reason", kMaxText);
}

void check(const Ack& m) {
  Check c{"Ack"};
  auto s = static_cast<uint8_t>(m.subject);
  c.require(s >= 1 && s <= static_cast<uint8_t>(MessageType::kOutputStaged),
            "subject", "unknown message type " + std::to_string(s));
  c.require(m.ok == m.error.empty(), "error", "must be empty iff ok");
  c.text(m.error, "error");
}
void put(Writer& w, const Ack& m) {
  w.u8(static_cast<uint8_t>(m.subject));
  w.u64(m.id);
  w.boolean(m.ok);
  w.str(m.error);
}
void get(Reader& r, Ack& m) {
  m.subject = static_cast<MessageType>(r.u8("subject"));
  m.id = r.u64("id");
  m.ok = r.boolean("ok");
  m.error = r.str("error", kMaxText);
}

void check(const Bye& m) { Check{"Bye"}.text(m.reason, "reason"); }
void put(Writer& w, const Bye& m) { w.str(m.reason); }
void get(Reader& r, Bye& m) { m.reason = r.str("reason", kMaxText); }

}  // namespace kiln::protocol::codec
