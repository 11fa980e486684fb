#include "kiln/protocol/messages.h"

#include <array>

#include "body_codec.h"
#include "kiln/store/local_store.h"
#include "wire.h"

namespace kiln::protocol {
namespace {

constexpr size_t kHeaderSize = 5;
constexpr std::array<const char*, 19> kNames = {
    "Hello",     "Welcome",      "Refused",    "Heartbeat",    "BuildStep",
    "NeedPaths", "PathData",     "Credit",     "Chunk",        "TransferAbort",
    "LogChunk",  "StepResult",   "CancelStep", "UploadOutput", "Ack",
    "Bye",       "StageRequest", "StageGrant", "OutputStaged"};

// Whether a message of this type has a raw data frame after the body.
bool hasDataFrame(MessageType t) {
  return t == MessageType::kChunk || t == MessageType::kLogChunk;
}

template <class T>
const std::string* dataOf(const T&) {
  return nullptr;
}
const std::string* dataOf(const Chunk& c) { return &c.data; }
const std::string* dataOf(const LogChunk& c) { return &c.data; }
void setData(auto&, std::string&&) {}
void setData(Chunk& c, std::string&& d) { c.data = std::move(d); }
void setData(LogChunk& c, std::string&& d) { c.data = std::move(d); }

template <size_t I>
Message decodeAs(MessageType type, const Frames& frames) {
  std::variant_alternative_t<I, Message> m;
  wire::Reader r(frames[1], messageTypeName(type));
  codec::get(r, m);
  r.finish();
  if (hasDataFrame(type)) setData(m, std::string(frames[2]));
  codec::check(m);
  return Message(std::in_place_index<I>, std::move(m));
}

template <size_t... I>
Message decodeIndex(size_t index, MessageType type, const Frames& frames,
                    std::index_sequence<I...>) {
  using Fn = Message (*)(MessageType, const Frames&);
  static constexpr Fn table[] = {&decodeAs<I>...};
  return table[index](type, frames);
}

}  // namespace

std::string messageTypeName(MessageType type) {
  auto t = static_cast<size_t>(type);
  if (t >= 1 && t <= kNames.size()) return kNames[t - 1];
  return "unknown(" + std::to_string(t) + ")";
}

VersionMismatch::VersionMismatch(uint16_t theirs, MessageType type)
    : FormatError("protocol: the peer speaks protocol " +
                  std::to_string(theirs) + ", this side speaks " +
                  std::to_string(kProtocolVersion) + " (in a " +
                  messageTypeName(type) + " message)"),
      theirs_(theirs),
      type_(type) {}

MessageType typeOf(const Message& msg) {
  return static_cast<MessageType>(msg.index() + 1);
}

Frames encode(const Message& msg, uint16_t version) {
  auto type = typeOf(msg);
  Frames frames;
  std::string header = "KL";
  header.push_back(static_cast<char>(version >> 8));
  header.push_back(static_cast<char>(version & 0xff));
  header.push_back(static_cast<char>(type));
  frames.push_back(std::move(header));
  std::visit(
      [&](const auto& m) {
        codec::check(m);
        wire::Writer w;
        codec::put(w, m);
        frames.push_back(w.take());
        if (auto* d = dataOf(m)) frames.push_back(*d);
      },
      msg);
  return frames;
}

std::pair<uint16_t, MessageType> decodeHeader(const std::string& frame) {
  if (frame.size() != kHeaderSize)
    throw FormatError("protocol: header frame has " +
                      std::to_string(frame.size()) + " bytes, expected " +
                      std::to_string(kHeaderSize));
  if (frame[0] != 'K' || frame[1] != 'L')
    throw FormatError(
        "protocol: not a kiln message (bad magic in the header frame)");
  uint16_t version = static_cast<uint16_t>(
      (static_cast<uint8_t>(frame[2]) << 8) | static_cast<uint8_t>(frame[3]));
  auto t = static_cast<uint8_t>(frame[4]);
  if (t < 1 || t > kNames.size())
    throw FormatError("protocol: unknown message type " + std::to_string(t));
  return {version, static_cast<MessageType>(t)};
}

Message decode(const Frames& frames) {
  if (frames.empty()) throw FormatError("protocol: empty message");
  auto [version, type] = decodeHeader(frames[0]);
  if (version != kProtocolVersion && type != MessageType::kRefused)
    throw VersionMismatch(version, type);
  size_t want = hasDataFrame(type) ? 3 : 2;
  if (frames.size() != want)
    throw FormatError("protocol: " + messageTypeName(type) + ": has " +
                      std::to_string(frames.size()) + " frames, expected " +
                      std::to_string(want));
  if (frames[1].size() > kMaxBodyFrame)
    throw FormatError("protocol: " + messageTypeName(type) + ": body of " +
                      std::to_string(frames[1].size()) +
                      " bytes exceeds the limit");
  if (hasDataFrame(type) && frames[2].size() > kMaxDataFrame)
    throw FormatError("protocol: " + messageTypeName(type) +
                      ": data frame of " + std::to_string(frames[2].size()) +
                      " bytes exceeds the limit of " +
                      std::to_string(kMaxDataFrame));
  return decodeIndex(static_cast<size_t>(type) - 1, type, frames,
                     std::make_index_sequence<std::variant_size_v<Message>>());
}

std::string versionMismatchText(uint32_t schedulerVersion,
                                uint32_t workerVersion) {
  return "scheduler speaks protocol " + std::to_string(schedulerVersion) +
         ", this worker speaks " + std::to_string(workerVersion) +
         ": upgrade the " +
         (workerVersion < schedulerVersion ? "worker" : "scheduler") +
         " so that both speak the same protocol";
}

PathInfo toPathInfo(const store::ValidPathInfo& info) {
  PathInfo p;
  p.path = info.path;
  p.narHash = info.narHash;
  p.narSize = info.narSize;
  p.references = info.references;
  p.deriver = info.deriver;
  return p;
}

store::ValidPathInfo toValidPathInfo(const PathInfo& info) {
  store::ValidPathInfo v(info.path);
  v.narHash = info.narHash;
  v.narSize = info.narSize;
  v.references = info.references;
  v.deriver = info.deriver;
  return v;
}

}  // namespace kiln::protocol
