#pragma once
// Per-message body codecs (body_codec.cc). check() throws FormatError naming
// the message and field; put() writes the body frame (data frames of Chunk
// and LogChunk are handled by the caller); get() reads it.

#include <cctype>
#include <string>
#include <vector>

#include "kiln/protocol/messages.h"
#include "wire.h"

namespace kiln::protocol::codec {

constexpr size_t kMaxText = 64 << 10;    // reasons, error messages
constexpr size_t kMaxIdent = 128;        // worker ids, features
constexpr uint32_t kMaxPaths = 1 << 20;  // closures, NeedPaths
constexpr uint32_t kMaxRefs = 1 << 16;   // references of one path
constexpr uint32_t kMaxFeatures = 256;
constexpr uint32_t kMaxSystems = 64;
constexpr uint32_t kMaxSlots = 4096;
constexpr uint32_t kMaxOutputs = 256;

/// Collects validation failures for one message.
struct Check {
  const char* msg;
  void require(bool ok, const char* field, const std::string& problem) const {
    if (!ok)
      throw FormatError(std::string("protocol: ") + msg + ": field '" + field +
                        "': " + problem);
  }
  void ident(const std::string& s, const char* field, std::string_view extra,
             size_t max = kMaxIdent) const {
    require(!s.empty() && s.size() <= max, field,
            "must be 1.." + std::to_string(max) + " bytes, got " +
                std::to_string(s.size()));
    for (char c : s)
      require(std::isalnum(static_cast<unsigned char>(c)) ||
                  extra.find(c) != std::string_view::npos,
              field, "contains illegal character '" + std::string(1, c) + "'");
  }
  void text(const std::string& s, const char* field) const {
    require(s.size() <= kMaxText, field, "longer than 64 KiB");
  }
};

/// Shared pieces of several bodies (body_codec.cc).
store::StorePath getPath(wire::Reader& r, const char* field);
void putInfo(wire::Writer& w, const PathInfo& p);
PathInfo getInfo(wire::Reader& r);
void checkInfo(const Check& c, const PathInfo& p);
void putStrings(wire::Writer& w, const std::vector<std::string>& v);
std::vector<std::string> getStrings(wire::Reader& r, const char* field,
                                    uint32_t max, size_t maxLen);

void check(const Hello& m);
void put(wire::Writer& w, const Hello& m);
void get(wire::Reader& r, Hello& m);
void check(const Welcome& m);
void put(wire::Writer& w, const Welcome& m);
void get(wire::Reader& r, Welcome& m);
void check(const Refused& m);
void put(wire::Writer& w, const Refused& m);
void get(wire::Reader& r, Refused& m);
void check(const Heartbeat& m);
void put(wire::Writer& w, const Heartbeat& m);
void get(wire::Reader& r, Heartbeat& m);
void check(const BuildStep& m);
void put(wire::Writer& w, const BuildStep& m);
void get(wire::Reader& r, BuildStep& m);
void check(const NeedPaths& m);
void put(wire::Writer& w, const NeedPaths& m);
void get(wire::Reader& r, NeedPaths& m);
void check(const PathData& m);
void put(wire::Writer& w, const PathData& m);
void get(wire::Reader& r, PathData& m);
void check(const Credit& m);
void put(wire::Writer& w, const Credit& m);
void get(wire::Reader& r, Credit& m);
void check(const Chunk& m);
void put(wire::Writer& w, const Chunk& m);
void get(wire::Reader& r, Chunk& m);
void check(const TransferAbort& m);
void put(wire::Writer& w, const TransferAbort& m);
void get(wire::Reader& r, TransferAbort& m);
void check(const LogChunk& m);
void put(wire::Writer& w, const LogChunk& m);
void get(wire::Reader& r, LogChunk& m);
void check(const StepResult& m);
void put(wire::Writer& w, const StepResult& m);
void get(wire::Reader& r, StepResult& m);
void check(const CancelStep& m);
void put(wire::Writer& w, const CancelStep& m);
void get(wire::Reader& r, CancelStep& m);
void check(const UploadOutput& m);
void put(wire::Writer& w, const UploadOutput& m);
void get(wire::Reader& r, UploadOutput& m);
void check(const Ack& m);
void put(wire::Writer& w, const Ack& m);
void get(wire::Reader& r, Ack& m);
void check(const Bye& m);
void put(wire::Writer& w, const Bye& m);
void get(wire::Reader& r, Bye& m);
void check(const StageRequest& m);
void put(wire::Writer& w, const StageRequest& m);
void get(wire::Reader& r, StageRequest& m);
void check(const StageGrant& m);
void put(wire::Writer& w, const StageGrant& m);
void get(wire::Reader& r, StageGrant& m);
void check(const OutputStaged& m);
void put(wire::Writer& w, const OutputStaged& m);
void get(wire::Reader& r, OutputStaged& m);

}  // namespace kiln::protocol::codec
