#include "kiln/protocol/messages.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/store/local_store.h"

namespace kiln::protocol {
namespace {

using store::StorePath;
using ::testing::HasSubstr;

const StorePath kA("0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a-hello-2.12");
const StorePath kB("1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b-glibc-2.35");
const StorePath kDrv("2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c-hello-2.12.drv");

PathInfo info(const StorePath& p, bool withDeriver = false) {
  PathInfo i;
  i.path = p;
  i.narHash = hashString(HashAlgo::kSha256, p.baseName());
  i.narSize = 1234;
  i.references = {kB};
  if (withDeriver) i.deriver = kDrv;
  return i;
}

StageGrant stageGrant() {
  StageGrant g;
  g.stepId = 42;
  g.outputName = "out";
  g.key = "staging/42/1/out.nar.zst";
  g.compression = "zstd";
  g.uploadId = "2~abc";
  g.partSize = 8 << 20;
  g.urls = {"http://127.0.0.1:9000/farm/staging/42/1/out.nar.zst?partNumber=1",
            "http://127.0.0.1:9000/farm/staging/42/1/out.nar.zst?partNumber=2"};
  g.uploadedParts = {{1, "\"etag-1\"", 8 << 20}};  // a resumption's
  return g;
}

std::vector<Message> samples() {
  Hello hello;
  hello.workerId = "builder-1.example.org";
  hello.systems = {"x86_64-linux", "i686-linux"};
  hello.supportedFeatures = {"kvm", "big-parallel"};
  hello.mandatoryFeatures = {"kvm"};
  hello.slots = 8;
  hello.speedFactor = 2.5;
  hello.storePathCount = 12345;
  hello.kilnVersion = "0.1.0";
  hello.heldSteps = {{41, kDrv}, {42, kDrv, true}};
  hello.thresholds.maxMemoryPressure = 20;
  hello.thresholds.maxLoadAverage = 16.5;
  hello.thresholds.minFreeDiskBytes = 10ull << 30;
  Heartbeat beat{0.75, 1ull << 40, {1, 2, 3}};
  beat.memoryPressure = 42.25;
  beat.ioPressure = 0;
  beat.freeMemoryBytes = 3ull << 30;
  BuildStep step;
  step.stepId = 42;
  step.drvPath = kDrv;
  step.drv =
      "Derive([(\"out\",\"/nix/store/x\",\"\",\"\")],[],[],\"x\",\"b\",[],[])";
  step.roots = {kA};
  step.inputs = {info(kA, true), info(kB)};
  step.logLimitBytes = 1 << 20;
  step.rankMs = 4000;
  step.check = true;
  PathData pd;
  pd.transferId = 7;
  pd.stepId = 42;
  pd.info = info(kA);
  UploadOutput up;
  up.transferId = 9;
  up.stepId = 42;
  up.outputName = "out";
  up.info = info(kA, true);
  StepResult res{42,
                 StepStatus::kFailedWithOutput,
                 "builder failed",
                 {{"out", info(kA)}},
                 1000,
                 2000,
                 100 << 20,
                 4500000,
                 1 << 20};
  return {hello,
          Welcome{"sched", 5000, 1 << 18, {41}},
          Refused{1, "unknown worker"},
          beat,
          step,
          NeedPaths{42, {kA, kB}},
          pd,
          Credit{7, 8},
          Chunk{7, 3, std::string("\0\1binary\xff", 10)},
          TransferAbort{7, "source vanished"},
          LogChunk{42, "building...\n"},
          res,
          CancelStep{42, "build cancelled by alice"},
          up,
          Ack{MessageType::kUploadOutput, 9, false, "hash mismatch"},
          Bye{"shutting down"},
          StageRequest{42, "out", info(kA, true), "xz", "2~abc"},
          stageGrant(),
          OutputStaged{42,
                       "out",
                       "staging/42/1/out.nar.zst",
                       "zstd",
                       info(kA),
                       hashString(HashAlgo::kSha256, "file"),
                       99,
                       {"\"etag-1\"", "\"etag-2\""}}};
}

TEST(Messages, EveryTypeRoundTrips) {
  auto all = samples();
  ASSERT_EQ(all.size(), std::variant_size_v<Message>);
  for (auto& m : all) {
    SCOPED_TRACE(messageTypeName(typeOf(m)));
    auto frames = encode(m);
    EXPECT_EQ(frames[0].substr(0, 2), "KL");
    EXPECT_EQ(decodeHeader(frames[0]).second, typeOf(m));
    EXPECT_EQ(decode(frames), m);
  }
}

// Where a message's optional tail starts in its body (npos: none): a body
// cut there decodes with the tail's defaults.
size_t optionalTail(const Message& m) {
  if (auto* r = std::get_if<StepResult>(&m)) return encode(*r)[1].size() - 24;
  if (auto* h = std::get_if<Hello>(&m)) {
    Hello bare = *h;
    bare.thresholds = {};
    return encode(bare)[1].size();  // without any, no tail is written
  }
  if (auto* b = std::get_if<Heartbeat>(&m)) {
    Heartbeat bare = *b;
    bare.memoryPressure = bare.cpuPressure = bare.ioPressure = std::nullopt;
    bare.freeMemoryBytes = std::nullopt;
    return encode(bare)[1].size();
  }
  if (auto* s = std::get_if<BuildStep>(&m)) return encode(*s)[1].size() - 1;
  if (auto* r = std::get_if<StageRequest>(&m)) {
    StageRequest bare = *r;
    bare.resumeUploadId.clear();
    return encode(bare)[1].size();
  }
  if (auto* g = std::get_if<StageGrant>(&m)) {
    StageGrant bare = *g;
    bare.uploadedParts.clear();
    return encode(bare)[1].size();
  }
  return std::string::npos;
}

TEST(Messages, EveryTruncationIsRejected) {
  for (auto& m : samples()) {
    auto frames = encode(m);
    for (size_t cut = 0; cut < frames[1].size(); ++cut) {
      // Optional tails are optional as a whole (below).
      if (cut == optionalTail(m)) continue;
      auto bad = frames;
      bad[1].resize(cut);
      try {
        decode(bad);
        ADD_FAILURE() << messageTypeName(typeOf(m)) << " cut at " << cut
                      << " accepted";
      } catch (const FormatError& e) {
        EXPECT_THAT(e.what(),
                    HasSubstr("protocol: " + messageTypeName(typeOf(m))));
      }
    }
  }
}

TEST(Messages, TrailingBytesAreRejected) {
  auto frames = encode(Bye{"x"});
  frames[1] += "junk";
  EXPECT_THROW(
      {
        try {
          decode(frames);
        } catch (const FormatError& e) {
          EXPECT_THAT(e.what(), HasSubstr("4 unexpected trailing bytes"));
          throw;
        }
      },
      FormatError);
}

std::string errorOf(const Frames& frames) {
  try {
    decode(frames);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Messages, BadHeadersAreRejected) {
  auto frames = encode(Bye{"x"});
  auto bad = frames;
  bad[0] = "KL";
  EXPECT_THAT(errorOf(bad), HasSubstr("header frame has 2 bytes, expected 5"));
  bad = frames;
  bad[0][0] = 'X';
  EXPECT_THAT(errorOf(bad), HasSubstr("not a kiln message"));
  bad = frames;
  bad[0][4] = 99;
  EXPECT_THAT(errorOf(bad), HasSubstr("unknown message type 99"));
  bad = frames;
  bad.push_back("extra");
  EXPECT_THAT(errorOf(bad), HasSubstr("Bye: has 3 frames, expected 2"));
  EXPECT_THAT(errorOf({}), HasSubstr("empty message"));
}

TEST(Messages, WrongTypeForBodyIsRejected) {
  // A Credit body announced as a Heartbeat: lengths disagree.
  auto frames = encode(Credit{7, 8});
  frames[0][4] = static_cast<char>(MessageType::kHeartbeat);
  EXPECT_THAT(errorOf(frames), HasSubstr("protocol: Heartbeat"));
}

TEST(Messages, OtherVersionIsAMismatch) {
  auto frames = encode(Bye{"x"}, kProtocolVersion + 1);
  try {
    decode(frames);
    FAIL() << "accepted";
  } catch (const VersionMismatch& e) {
    EXPECT_EQ(e.theirVersion(), kProtocolVersion + 1);
    EXPECT_THAT(e.what(),
                HasSubstr("peer speaks protocol 6, this side speaks 5"));
  }
  // Refused keeps its layout, so an old worker can read a new scheduler's.
  auto refused = decode(encode(Refused{7, "go away"}, 7));
  EXPECT_EQ(std::get<Refused>(refused).schedulerVersion, 7u);
  EXPECT_EQ(
      versionMismatchText(2, 1),
      "scheduler speaks protocol 2, this worker speaks 1: upgrade the worker "
      "so that both speak the same protocol");
}

TEST(Messages, OversizeFieldsAreRejected) {
  auto frames = encode(Bye{"x"});
  frames[1] = std::string("\xff\xff\xff\x7f", 4);  // 2 GiB reason
  EXPECT_THAT(errorOf(frames),
              HasSubstr("field 'reason': length 2147483647 exceeds"));
  frames = encode(Chunk{1, 0, "x"});
  frames[2] = std::string(kMaxDataFrame + 1, 'x');
  EXPECT_THAT(errorOf(frames),
              HasSubstr("data frame of 4194305 bytes exceeds"));
  // A list count larger than the bytes that follow cannot allocate.
  frames = encode(NeedPaths{1, {kA}});
  frames[1][8] = '\xff';
  frames[1][9] = '\xff';
  EXPECT_THAT(errorOf(frames),
              HasSubstr("field 'paths': list of 65535 entries but only"));
}

TEST(Messages, InvalidValuesAreRejectedOnBothSides) {
  Hello h;
  h.workerId = "w";
  EXPECT_THAT(errorOf(encode(Bye{})), HasSubstr("(accepted)"));
  try {
    encode(h);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_THAT(e.what(), HasSubstr("Hello: field 'systems'"));
  }
  h.systems = {"x86_64-linux"};
  h.mandatoryFeatures = {"kvm"};
  EXPECT_THROW(encode(h), FormatError);
  h.mandatoryFeatures.clear();
  h.heldSteps = {{7, kDrv}, {7, kDrv}};
  try {
    encode(h);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_THAT(e.what(), HasSubstr("field 'heldSteps': a step is listed"));
  }
  h.heldSteps.clear();
  h.workerId = "bad id";
  EXPECT_THROW(encode(h), FormatError);
  EXPECT_THROW(encode(Credit{0, 1}), FormatError);
  EXPECT_THROW(encode(Chunk{1, 0, ""}), FormatError);
  EXPECT_THROW(encode(Ack{MessageType::kBye, 1, true, "not empty"}),
               FormatError);
  // A rank beyond kMaxRankMs, patched into an encoded step (its last u64).
  Frames frames;
  BuildStep step;
  step.stepId = 1;
  step.drvPath = kDrv;
  step.drv = "Derive([],[],[],\"x\",\"b\",[],[])";
  step.rankMs = kMaxRankMs;
  frames = encode(step);
  frames[1][frames[1].size() - 6] = 1;  // big-endian: + 2^40
  EXPECT_THAT(errorOf(frames), HasSubstr("BuildStep: field 'rankMs'"));
  step.rankMs = kMaxRankMs + 1;
  EXPECT_THROW(encode(step), FormatError);

  // A status that Hydra does not define, patched into an encoded result.
  frames = encode(StepResult{1, StepStatus::kSuccess, "", {}, 0, 0});
  frames[1][8] = 5;
  EXPECT_THAT(errorOf(frames),
              HasSubstr("StepResult: field 'status': unknown status 5"));
  // The usage fields are optional at the end of the body: a result
  // without them (24 bytes shorter) decodes with zeros.
  StepResult withUsage{7, StepStatus::kOutOfMemory, "oom", {}, 1, 2, 3, 4, 5};
  frames = encode(withUsage);
  EXPECT_EQ(std::get<StepResult>(decode(frames)), withUsage);
  frames[1].resize(frames[1].size() - 24);
  auto bare = std::get<StepResult>(decode(frames));
  EXPECT_EQ(bare.status, StepStatus::kOutOfMemory);
  EXPECT_EQ(bare.peakMemoryBytes + bare.cpuTimeUs + bare.buildDirBytes, 0u);
  // A BuildStep of a scheduler before reproducibility checks (no `check`
  // byte) is an ordinary build.
  BuildStep check;
  check.drvPath = kDrv;
  check.drv = "Derive([],[],[],\"x\",\"b\",[],[])";
  check.check = true;
  frames = encode(check);
  EXPECT_TRUE(std::get<BuildStep>(decode(frames)).check);
  frames[1].resize(optionalTail(check));
  EXPECT_FALSE(std::get<BuildStep>(decode(frames)).check);
  // A heartbeat and a Hello of a worker before the pressure fields decode
  // with none; a pressure that is no percentage is refused.
  Heartbeat beat{1.5, 10, {}};
  beat.cpuPressure = 12;
  frames = encode(beat);
  frames[1].resize(optionalTail(beat));
  EXPECT_EQ(std::get<Heartbeat>(decode(frames)), (Heartbeat{1.5, 10, {}}));
  beat.cpuPressure = 120;
  EXPECT_THROW(encode(beat), FormatError);
  Hello hello;
  hello.workerId = "w";
  hello.systems = {"x86_64-linux"};
  hello.thresholds.maxIoPressure = -1;
  EXPECT_THROW(encode(hello), FormatError);
  hello.thresholds.maxIoPressure = 30;
  frames = encode(hello);
  frames[1].resize(optionalTail(hello));
  EXPECT_EQ(std::get<Hello>(decode(frames)).thresholds, PressureThresholds{});
  // An invalid store path name.
  frames = encode(NeedPaths{1, {kA}});
  frames[1][16 + 33] = '/';
  EXPECT_THAT(errorOf(frames), HasSubstr("field 'paths': store path name"));
  // A non-sha256 NAR hash.
  PathData pd;
  pd.transferId = 1;
  pd.info = info(kA);
  frames = encode(pd);
  auto pos = 8 + 8 + 4 + 4 + kA.baseName().size();
  frames[1][pos] = static_cast<char>(HashAlgo::kSha1);
  EXPECT_THAT(errorOf(frames), HasSubstr("field 'narHash'"));
}

TEST(Messages, DirectUploadMessagesAreChecked) {
  auto errorOfEncoding = [](const Message& m) -> std::string {
    try {
      encode(m);
    } catch (const FormatError& e) {
      return e.what();
    }
    return "(accepted)";
  };
  StageRequest req{42, "out", info(kA), "gzip", ""};
  EXPECT_THAT(errorOfEncoding(req),
              HasSubstr("StageRequest: field 'compression'"));
  auto g = stageGrant();
  g.key = "nar/published.nar.zst";  // never a published key
  EXPECT_THAT(errorOfEncoding(g), HasSubstr("StageGrant: field 'key'"));
  g = stageGrant();
  g.key = "staging/../nar/x";
  EXPECT_THAT(errorOfEncoding(g), HasSubstr("must not contain '..'"));
  g = stageGrant();
  g.partSize = 1 << 20;  // below S3's smallest part
  EXPECT_THAT(errorOfEncoding(g), HasSubstr("field 'partSize'"));
  g = stageGrant();
  g.uploadId.clear();  // a single PUT has one URL and no part size
  g.uploadedParts.clear();
  EXPECT_THAT(errorOfEncoding(g), HasSubstr("field 'urls'"));
  g.urls.resize(1);
  EXPECT_THAT(errorOfEncoding(g), HasSubstr("field 'partSize'"));
  g.partSize = 0;
  EXPECT_EQ(errorOfEncoding(g), "(accepted)");
  g.urls = {"file:///etc/passwd"};
  EXPECT_THAT(errorOfEncoding(g), HasSubstr("http(s) URLs"));
  OutputStaged st{42,     "out",    "staging/42/1/out.nar.zst",
                  "zstd", info(kA), hashString(HashAlgo::kSha1, "x"),
                  1,      {}};
  EXPECT_THAT(errorOfEncoding(st), HasSubstr("field 'fileHash'"));
  st.fileHash = hashString(HashAlgo::kSha256, "x");
  st.etags = {"a</ETag><Part>"};  // nothing may reach the completion XML
  EXPECT_THAT(errorOfEncoding(st), HasSubstr("field 'etags'"));
  // A resumption's parts: numbered within the grant's URLs, multipart only.
  g = stageGrant();
  g.uploadedParts[0].number = 3;
  EXPECT_THAT(errorOfEncoding(g), HasSubstr("field 'uploadedParts'"));
  g = stageGrant();
  g.uploadedParts[0].etag = "a</ETag>";
  EXPECT_THAT(errorOfEncoding(g), HasSubstr("field 'uploadedParts'"));
  req = StageRequest{42, "out", info(kA), "zstd", "id&x=1"};
  EXPECT_THAT(errorOfEncoding(req), HasSubstr("field 'uploadId'"));
  // A decoder refuses too: a StageGrant URL list longer than S3's limit.
  auto noParts = stageGrant();
  noParts.uploadedParts.clear();
  Frames frames = encode(noParts);
  auto at = frames[1].find(std::string("\x02\0\0\0", 4));
  ASSERT_NE(at, std::string::npos);
  frames[1][at + 1] = 0x30;  // 0x3002 = 12290 URLs
  EXPECT_THAT(errorOf(frames), HasSubstr("StageGrant: field 'urls'"));
}

TEST(Messages, PathInfoConvertsBothWays) {
  PathInfo travelled = info(kA, true);
  store::ValidPathInfo v = toValidPathInfo(travelled);
  EXPECT_EQ(v.path, kA);
  EXPECT_EQ(v.narHash, travelled.narHash);
  EXPECT_EQ(v.narSize, 1234u);
  EXPECT_EQ(v.references, store::StorePathSet{kB});
  ASSERT_TRUE(v.deriver.has_value());
  EXPECT_EQ(*v.deriver, kDrv);
  // What does not travel is left for the receiver to decide.
  EXPECT_FALSE(v.ultimate);
  EXPECT_TRUE(v.sigs.empty());
  EXPECT_TRUE(v.ca.empty());
  EXPECT_EQ(toPathInfo(v), travelled);
  // Without a deriver, none is made up.
  EXPECT_FALSE(toValidPathInfo(info(kB)).deriver.has_value());
}

}  // namespace
}  // namespace kiln::protocol
