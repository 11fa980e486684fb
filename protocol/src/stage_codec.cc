// Bodies of the direct-upload messages (StageRequest, StageGrant,
// OutputStaged; docs/protocol.md "Direct uploads").
#include "body_codec.h"

namespace kiln::protocol::codec {

using wire::Reader;
using wire::Writer;

namespace {

constexpr size_t kMaxKey = 1024;        // an object key
constexpr size_t kMaxUrl = 8 << 10;     // a presigned URL
constexpr size_t kMaxEtag = 256;        // a part's ETag
constexpr uint64_t kMinPart = 5 << 20;  // S3's smallest part but the last

void checkCompression(const Check& c, const std::string& s) {
  c.require(s == "zstd" || s == "xz", "compression",
            "must be zstd or xz, got '" + s.substr(0, 64) + "'");
}

// A staging key: `staging/` then printable ASCII without spaces or '..'.
void checkKey(const Check& c, const std::string& k) {
  c.require(k.starts_with("staging/") && k.size() <= kMaxKey, "key",
            "must start with 'staging/' and be at most 1024 bytes");
  c.require(k.find("..") == std::string::npos, "key", "must not contain '..'");
  for (char ch : k)
    c.require(ch > ' ' && ch < 127, "key",
              "contains a control or non-ASCII byte");
}

}  // namespace

void check(const StageRequest& m) {
  Check c{"StageRequest"};
  c.ident(m.outputName, "outputName", "+-._?=", 211);
  checkInfo(c, m.info);
  checkCompression(c, m.compression);
}
void put(Writer& w, const StageRequest& m) {
  w.u64(m.stepId);
  w.str(m.outputName);
  putInfo(w, m.info);
  w.str(m.compression);
}
void get(Reader& r, StageRequest& m) {
  m.stepId = r.u64("stepId");
  m.outputName = r.str("outputName", 211);
  m.info = getInfo(r);
  m.compression = r.str("compression", 16);
}

void check(const StageGrant& m) {
  Check c{"StageGrant"};
  c.ident(m.outputName, "outputName", "+-._?=", 211);
  checkKey(c, m.key);
  checkCompression(c, m.compression);
  c.require(m.uploadId.size() <= kMaxKey, "uploadId", "longer than 1024 bytes");
  c.require(!m.urls.empty() && m.urls.size() <= kMaxStageParts, "urls",
            "must hold 1.." + std::to_string(kMaxStageParts) + " URLs");
  if (m.uploadId.empty()) {
    c.require(m.urls.size() == 1, "urls", "a single PUT has one URL");
    c.require(m.partSize == 0, "partSize", "must be 0 for a single PUT");
  } else {
    c.require(m.partSize >= kMinPart && m.partSize <= (uint64_t{5} << 30),
              "partSize", "must be 5 MiB..5 GiB");
  }
  for (auto& u : m.urls)
    c.require((u.starts_with("http://") || u.starts_with("https://")) &&
                  u.size() <= kMaxUrl,
              "urls", "must be http(s) URLs of at most 8 KiB");
}
void put(Writer& w, const StageGrant& m) {
  w.u64(m.stepId);
  w.str(m.outputName);
  w.str(m.key);
  w.str(m.compression);
  w.str(m.uploadId);
  w.u64(m.partSize);
  putStrings(w, m.urls);
}
void get(Reader& r, StageGrant& m) {
  m.stepId = r.u64("stepId");
  m.outputName = r.str("outputName", 211);
  m.key = r.str("key", kMaxKey);
  m.compression = r.str("compression", 16);
  m.uploadId = r.str("uploadId", kMaxKey);
  m.partSize = r.u64("partSize");
  m.urls = getStrings(r, "urls", kMaxStageParts, kMaxUrl);
}

void check(const OutputStaged& m) {
  Check c{"OutputStaged"};
  c.ident(m.outputName, "outputName", "+-._?=", 211);
  checkKey(c, m.key);
  checkCompression(c, m.compression);
  checkInfo(c, m.info);
  c.require(m.fileHash.algo() == HashAlgo::kSha256, "fileHash",
            "must be sha256");
  c.require(m.fileSize > 0, "fileSize", "must be > 0");
  c.require(m.etags.size() <= kMaxStageParts, "etags", "too many parts");
  for (auto& e : m.etags)
    c.require(!e.empty() && e.size() <= kMaxEtag &&
                  e.find_first_of("<>&\r\n") == std::string::npos,
              "etags", "must be 1..256 bytes without <, >, & or line breaks");
}
void put(Writer& w, const OutputStaged& m) {
  w.u64(m.stepId);
  w.str(m.outputName);
  w.str(m.key);
  w.str(m.compression);
  putInfo(w, m.info);
  w.hash(m.fileHash);
  w.u64(m.fileSize);
  putStrings(w, m.etags);
}
void get(Reader& r, OutputStaged& m) {
  m.stepId = r.u64("stepId");
  m.outputName = r.str("outputName", 211);
  m.key = r.str("key", kMaxKey);
  m.compression = r.str("compression", 16);
  m.info = getInfo(r);
  m.fileHash = r.hash("fileHash");
  m.fileSize = r.u64("fileSize");
  m.etags = getStrings(r, "etags", kMaxStageParts, kMaxEtag);
}

}  // namespace kiln::protocol::codec
