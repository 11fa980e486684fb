#pragma once
/// The scheduler ⇄ worker messages (docs/protocol.md) and their encoding.
///
/// A message travels as a ZeroMQ multipart: a 5-byte header frame
/// ("KL", protocol version as u16 big-endian, type as u8), a body frame in
/// kiln's length-prefixed binary encoding, and, for `Chunk` and `LogChunk`,
/// one raw data frame. Decoders validate every field and throw FormatError
/// (or VersionMismatch) naming the message and the field.

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kiln/common/error.h"
#include "kiln/common/hash.h"
#include "kiln/common/status.h"
#include "kiln/store/store_path.h"

namespace kiln::store {
struct ValidPathInfo;
}  // namespace kiln::store

namespace kiln::protocol {

/// The version this build speaks. Bump it on any change to a message layout
/// or to what a message means (docs/protocol.md, "Versioning"); peers of
/// different versions refuse each other (only Refused keeps a frozen layout,
/// so that the refusal can always be read).
constexpr uint16_t kProtocolVersion = 5;

/// Largest data frame of a `Chunk` or `LogChunk` a decoder accepts.
constexpr size_t kMaxDataFrame = 4 << 20;
/// Largest `.drv` a `BuildStep` may carry.
constexpr size_t kMaxDrvSize = 16 << 20;
/// Largest `BuildStep.rankMs` (about 31 years).
constexpr uint64_t kMaxRankMs = uint64_t{1} << 40;
/// Largest body frame a decoder accepts (bounds every list in it).
constexpr size_t kMaxBodyFrame = 256 << 20;

/// Message types; the numbers are on the wire and never reused.
enum class MessageType : uint8_t {
  kHello = 1,
  kWelcome = 2,
  kRefused = 3,
  kHeartbeat = 4,
  kBuildStep = 5,
  kNeedPaths = 6,
  kPathData = 7,
  kCredit = 8,
  kChunk = 9,
  kTransferAbort = 10,
  kLogChunk = 11,
  kStepResult = 12,
  kCancelStep = 13,
  kUploadOutput = 14,
  kAck = 15,
  kBye = 16,
  kStageRequest = 17,
  kStageGrant = 18,
  kOutputStaged = 19,
};

/// "Hello", "Welcome", ...; "unknown(N)" for other values.
std::string messageTypeName(MessageType type);

/// Thrown when a header frame carries another protocol version. `what()`
/// says which version each side speaks.
class VersionMismatch : public FormatError {
 public:
  VersionMismatch(uint16_t theirs, MessageType type);
  uint16_t theirVersion() const { return theirs_; }
  MessageType type() const { return type_; }

 private:
  uint16_t theirs_;
  MessageType type_;
};

/// A store object as it travels: path, NAR hash and size, references, and
/// optionally the deriver.
struct PathInfo {
  store::StorePath path{"00000000000000000000000000000000-x"};
  Hash narHash{HashAlgo::kSha256};
  uint64_t narSize = 0;
  store::StorePathSet references;
  std::optional<store::StorePath> deriver;
  bool operator==(const PathInfo&) const = default;
};

/// The travelling part of a store's registration of a valid path.
PathInfo toPathInfo(const store::ValidPathInfo& info);

/// The registration a receiver makes of a path that travelled as `info`
/// (path, NAR hash and size, references, deriver). The rest (signatures,
/// CA, `ultimate`) is left at its default for the receiver to set; the
/// store verifies the NAR against it when the path is added.
store::ValidPathInfo toValidPathInfo(const PathInfo& info);

/// A worker's pressure thresholds (docs/scheduler.md, "Pressure"): over
/// any of them it gets no new step. Each is off when absent.
struct PressureThresholds {
  std::optional<double> maxLoadAverage;     ///< finite, > 0
  std::optional<double> maxMemoryPressure;  ///< PSI percent, 0..100
  std::optional<double> maxCpuPressure;     ///< PSI percent, 0..100
  std::optional<double> maxIoPressure;      ///< PSI percent, 0..100
  std::optional<uint64_t> minFreeDiskBytes;
  bool operator==(const PressureThresholds&) const = default;
};

/// A step a worker still holds when it says Hello: running, or finished
/// with a result the scheduler has not acknowledged.
struct HeldStep {
  uint64_t stepId = 0;
  store::StorePath drvPath{"00000000000000000000000000000000-x.drv"};
  /// Its build ended: the worker holds its result (and outputs) for the
  /// scheduler to record, and no slot for it (since protocol 5).
  bool resultReady = false;
  bool operator==(const HeldStep&) const = default;
};

/// Worker → scheduler, first message of a connection.
struct Hello {
  std::string workerId;  ///< [A-Za-z0-9._@:-]{1,128}
  uint32_t protocolVersion = kProtocolVersion;
  std::string storeDir = "/nix/store";  ///< must equal the scheduler's
  std::vector<std::string> systems;     ///< non-empty, e.g. "x86_64-linux"
  std::vector<std::string> supportedFeatures;
  std::vector<std::string> mandatoryFeatures;  ///< a subset of supported
  uint32_t slots = 1;                          ///< 1..4096
  double speedFactor = 1.0;                    ///< finite, > 0
  uint64_t storePathCount = 0;  ///< paths already in the worker's store
  std::string kilnVersion;
  /// Steps this worker still holds (≤ 4096, ids unique): the scheduler
  /// adopts those it dispatched to this worker and has not settled
  /// (Welcome::adoptedSteps); the worker drops the others.
  std::vector<HeldStep> heldSteps;
  /// Optional (a body that ends before it: no thresholds).
  PressureThresholds thresholds{};
  bool operator==(const Hello&) const = default;
};

/// Scheduler → worker: the Hello was accepted.
struct Welcome {
  std::string schedulerId;
  uint32_t heartbeatIntervalMs = 10000;  ///< 1..3600000
  uint32_t chunkSize = 256 << 10;        ///< NAR chunk size; ≤ kMaxDataFrame
  /// The Hello's held steps the scheduler takes as running on this
  /// worker (their results are expected); the others are to be dropped.
  std::vector<uint64_t> adoptedSteps;
  bool operator==(const Welcome&) const = default;
};

/// Scheduler → worker: the worker may not join (bad version, store dir,
/// unknown worker). Its layout never changes between versions.
struct Refused {
  uint32_t schedulerVersion = kProtocolVersion;
  std::string reason;
  bool operator==(const Refused&) const = default;
};

/// Worker → scheduler, periodically.
struct Heartbeat {
  double load = 0;  ///< 1-minute load average; finite, ≥ 0
  uint64_t freeDiskBytes = 0;
  std::vector<uint64_t> runningSteps;
  /// Optional (a body that ends before them: none known; each absent when
  /// the worker could not read it): pressure stall information, "some"
  /// over 10 s, in percent (0..100), and available memory.
  std::optional<double> memoryPressure{};
  std::optional<double> cpuPressure{};
  std::optional<double> ioPressure{};
  std::optional<uint64_t> freeMemoryBytes{};
  bool operator==(const Heartbeat&) const = default;
};

/// Scheduler → worker: build one derivation.
struct BuildStep {
  uint64_t stepId = 0;
  store::StorePath drvPath{"00000000000000000000000000000000-x.drv"};
  std::string drv;  ///< the ATerm bytes, ≤ kMaxDrvSize
  /// The step's direct inputs: its input sources and the outputs of its
  /// input derivations. The input closure is these and everything they
  /// reference.
  std::vector<store::StorePath> roots;
  /// Metadata of the closure paths the worker may lack (the scheduler
  /// leaves out what it knows the worker holds, with their closures). The
  /// worker takes the references of other paths from its own store.
  std::vector<PathInfo> inputs;
  uint64_t maxSilentSec = 3600;
  uint64_t timeoutSec = 36000;
  uint64_t logLimitBytes = 0;     ///< 0 = unlimited
  uint64_t outputLimitBytes = 0;  ///< 0 = unlimited
  /// The step's rank: the scheduler's longest chain of expected durations
  /// from it to a top-level build, itself included (ms, ≤ kMaxRankMs).
  /// The worker gives its CPUs to the running builds of highest rank.
  uint64_t rankMs = 0;
  /// A reproducibility check's second build (docs/release.md): build even
  /// if the outputs are valid elsewhere, never register them in the
  /// worker's store, upload them over the connection only (no direct
  /// upload) for the scheduler to compare. Optional trailing field: a
  /// message without it is not a check.
  bool check = false;
  bool operator==(const BuildStep&) const = default;
};

/// How a worker's aborted StepResult of a check build begins when the
/// worker refused it because it holds an output already (it cannot build
/// it again): the scheduler sends the check to another worker.
inline constexpr std::string_view kCheckRefusedPrefix = "check refused: ";

/// Worker → scheduler: send me these inputs of a step (one PathData each).
struct NeedPaths {
  uint64_t stepId = 0;
  std::vector<store::StorePath> paths;  ///< non-empty
  bool operator==(const NeedPaths&) const = default;
};

/// Opens a NAR transfer (PathData scheduler → worker, UploadOutput worker →
/// scheduler). The receiver answers with Credit (accept) or Ack(ok=false).
struct TransferHeader {
  uint64_t transferId = 0;  ///< unique per sender and connection, ≠ 0
  uint64_t stepId = 0;
  std::string outputName;  ///< UploadOutput: which output; else empty
  PathInfo info;
  bool operator==(const TransferHeader&) const = default;
};
struct PathData : TransferHeader {
  bool operator==(const PathData&) const = default;
};
struct UploadOutput : TransferHeader {
  bool operator==(const UploadOutput&) const = default;
};

/// Receiver → sender: you may send `chunks` more chunks of transfer `id`.
struct Credit {
  uint64_t transferId = 0;
  uint32_t chunks = 0;  ///< ≥ 1
  bool operator==(const Credit&) const = default;
};

/// Sender → receiver: chunk number `seq` (from 0) of a transfer.
struct Chunk {
  uint64_t transferId = 0;
  uint64_t seq = 0;
  std::string data;  ///< its own frame, 1..kMaxDataFrame bytes
  bool operator==(const Chunk&) const = default;
};

/// Sender → receiver: the transfer stops (the source failed, the step was
/// cancelled). The receiver discards what it has.
struct TransferAbort {
  uint64_t transferId = 0;
  std::string reason;
  bool operator==(const TransferAbort&) const = default;
};

/// Worker → scheduler: a piece of a step's build log.
struct LogChunk {
  uint64_t stepId = 0;
  std::string data;  ///< its own frame, ≤ kMaxDataFrame bytes
  bool operator==(const LogChunk&) const = default;
};

/// Hydra's step status numbers (kiln/common/status.h, shared with the
/// scheduler's core and the worker).
using kiln::StepStatus;

/// One built output of a step.
struct BuiltOutput {
  std::string name;  ///< "out", "dev", ...
  PathInfo info;
  bool operator==(const BuiltOutput&) const = default;
};

/// Worker → scheduler: a step finished (outputs are uploaded first).
struct StepResult {
  uint64_t stepId = 0;
  StepStatus status = StepStatus::kSuccess;
  std::string errorMsg;
  std::vector<BuiltOutput> outputs;
  int64_t startTimeMs = 0;  ///< Unix time
  int64_t stopTimeMs = 0;   ///< ≥ startTimeMs
  /// What the build used (docs/worker.md, "Limits per build"); 0: not
  /// measured. Optional at the end of the body: a body without them
  /// decodes with zeros.
  uint64_t peakMemoryBytes = 0;  ///< its control group's peak
  uint64_t cpuTimeUs = 0;        ///< CPU time of all its processes
  uint64_t buildDirBytes = 0;    ///< largest build directory seen
  bool operator==(const StepResult&) const = default;
};

/// Scheduler → worker: stop a step and kill its processes.
struct CancelStep {
  uint64_t stepId = 0;
  std::string reason;
  bool operator==(const CancelStep&) const = default;
};

/// Acknowledges message `subject` about object `id` (a step or transfer id).
/// Ends a transfer from the receiver's side: ok after the NAR was verified
/// and handed over, !ok with the error otherwise. For a StepResult (since
/// protocol 5): ok only once the result is recorded in the state database
/// by the scheduler holding the farm's lock; until then the worker keeps
/// the step, its result and outputs, and offers them again after a
/// reconnection or fail-over.
struct Ack {
  MessageType subject = MessageType::kStepResult;
  uint64_t id = 0;
  bool ok = true;
  std::string error;  ///< empty iff ok
  bool operator==(const Ack&) const = default;
};

/// Either side: the connection is closing.
struct Bye {
  std::string reason;
  bool operator==(const Bye&) const = default;
};

/// Largest number of part URLs a StageGrant may carry (S3's limit).
constexpr uint32_t kMaxStageParts = 10000;

/// Worker → scheduler (direct uploads, docs/protocol.md "Direct uploads"):
/// may output `outputName` of step `stepId` (built, `info` as hashed) go
/// straight to the farm's object store, compressed with `compression`?
/// Answered with a StageGrant, or Ack{subject: StageRequest, ok: false}
/// (then the worker uploads it with UploadOutput as usual).
struct StageRequest {
  uint64_t stepId = 0;
  std::string outputName;
  PathInfo info;
  std::string compression = "zstd";  ///< zstd or xz
  /// Optional (a body that ends before it: empty): the multipart upload a
  /// restarted worker resumes (docs/protocol.md "Resuming a multipart
  /// upload"); the grant then lists the parts the store already holds.
  std::string resumeUploadId;
  bool operator==(const StageRequest&) const = default;
};

/// A part of a multipart upload the object store already holds.
struct StagedPart {
  uint32_t number = 0;  ///< 1..kMaxStageParts
  std::string etag;
  uint64_t size = 0;
  bool operator==(const StagedPart&) const = default;
};

/// Scheduler → worker: where to PUT the compressed NAR of an output: a
/// staging key (never a published one) and presigned URLs, valid for a
/// while. With an empty `uploadId`, `urls` holds one URL for a single PUT
/// of the whole object; otherwise it is a multipart upload and `urls[i]`
/// is part i+1, each part `partSize` bytes but the last (the worker uses
/// as many as its object needs).
struct StageGrant {
  uint64_t stepId = 0;
  std::string outputName;
  std::string key;          ///< `staging/…`
  std::string compression;  ///< as requested
  std::string uploadId;     ///< empty: single PUT
  uint64_t partSize = 0;    ///< multipart only, ≥ 5 MiB
  std::vector<std::string> urls;
  /// Optional (a body that ends before it: empty): answering a
  /// StageRequest with a `resumeUploadId` the store knows, the parts of
  /// that upload (`uploadId` is then the same) already uploaded, by number.
  std::vector<StagedPart> uploadedParts;
  bool operator==(const StageGrant&) const = default;
};

/// Worker → scheduler: the object is staged. `info` is the output as the
/// worker hashed it; `fileHash`/`fileSize` the compressed object's sha256
/// and size; `etags` the ETag of each part in order (multipart only).
/// Answered with Ack{subject: OutputStaged, id: stepId} once the farm has
/// verified and published it (ok), or refused it (!ok, with why); the
/// worker sends its StepResult without waiting for it (the scheduler holds
/// the result until the output is verified).
struct OutputStaged {
  uint64_t stepId = 0;
  std::string outputName;
  std::string key;
  std::string compression;
  PathInfo info;
  Hash fileHash{HashAlgo::kSha256};
  uint64_t fileSize = 0;
  std::vector<std::string> etags;
  bool operator==(const OutputStaged&) const = default;
};

/// Any message.
using Message = std::variant<Hello, Welcome, Refused, Heartbeat, BuildStep,
                             NeedPaths, PathData, Credit, Chunk, TransferAbort,
                             LogChunk, StepResult, CancelStep, UploadOutput,
                             Ack, Bye, StageRequest, StageGrant, OutputStaged>;

/// The type of a message.
MessageType typeOf(const Message& msg);

/// Frames of one multipart message.
using Frames = std::vector<std::string>;

/// Encodes `msg` as frames; `version` is for tests that fake another peer.
/// Throws FormatError if a field is out of range (the same checks the
/// decoder makes), so that nothing invalid is ever sent.
Frames encode(const Message& msg, uint16_t version = kProtocolVersion);

/// Decodes and validates a multipart message. Throws VersionMismatch for
/// another protocol version (except Refused, whose layout is frozen and
/// which decodes anyway), and FormatError for anything malformed.
Message decode(const Frames& frames);

/// Reads only the header frame: (version, type). Throws FormatError.
std::pair<uint16_t, MessageType> decodeHeader(const std::string& frame);

/// The text a refused worker prints: "scheduler speaks protocol N, this
/// worker speaks M: upgrade the worker|scheduler so that both speak the
/// same protocol".
std::string versionMismatchText(uint32_t schedulerVersion,
                                uint32_t workerVersion);

/// Whether `status` is one of Hydra's step status numbers.
using kiln::isValidStepStatus;

}  // namespace kiln::protocol
