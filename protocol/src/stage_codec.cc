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

void checkUploadId(const Check& c, const std::string& id) {
  c.require(
      id.size() <= kMaxKey && id.find_first_of("&?# \"<>") == std::string::npos,
      "uploadId", "must be at most 1024 bytes without &?# \"<> or spaces");
}

void checkEtag(const Check& c, const std::string& e, const char* field) {
  c.require(!e.empty() && e.size() <= kMaxEtag &&
                e.find_first_of("<>&\r\n") == std::string::npos,
            field, "must be 1..256 bytes without <, >, & or line breaks");
}

}  // namespace

void check(const StageRequest& m) {
  Check c{"StageRequest"};
  c.ident(m.outputName, "outputName", "+-._?=", 211);
  checkInfo(c, m.info);
  checkCompression(c, m.compression);
  checkUploadId(c, m.resumeUploadId);
}
void put(Writer& w, const StageRequest& m) {
  w.u64(m.stepId);
  w.str(m.outputName);
  putInfo(w, m.info);
  w.str(m.compression);
  if (!m.resumeUploadId.empty()) w.str(m.resumeUploadId);
}
void get(Reader& r, StageRequest& m) {
  m.stepId = r.u64("stepId");
  m.outputName = r.str("outputName", 211);
  m.info = getInfo(r);
  m.compression = r.str("compression", 16);
  if (r.atEnd()) return;  // not a resumption
  m.resumeUploadId = r.str("resumeUploadId", kMaxKey);
}

void check(const StageGrant& m) {
  Check c{"StageGrant"};
  c.ident(m.outputName, "outputName", "+-._?=", 211);
  checkKey(c, m.key);
  checkCompression(c, m.compression);
  checkUploadId(c, m.uploadId);
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
  c.require(m.uploadedParts.empty() || !m.uploadId.empty(), "uploadedParts",
            "only for a multipart upload");
  c.require(m.uploadedParts.size() <= m.urls.size(), "uploadedParts",
            "more parts than URLs");
  for (auto& p : m.uploadedParts) {
    c.require(p.number >= 1 && p.number <= m.urls.size(), "uploadedParts",
              "a part number must be 1..the number of URLs");
    checkEtag(c, p.etag, "uploadedParts");
  }
}
void put(Writer& w, const StageGrant& m) {
  w.u64(m.stepId);
  w.str(m.outputName);
  w.str(m.key);
  w.str(m.compression);
  w.str(m.uploadId);
  w.u64(m.partSize);
  putStrings(w, m.urls);
  if (m.uploadedParts.empty()) return;
  w.u32(uint32_t(m.uploadedParts.size()));
  for (auto& p : m.uploadedParts) {
    w.u32(p.number);
    w.str(p.etag);
    w.u64(p.size);
  }
}
void get(Reader& r, StageGrant& m) {
  m.stepId = r.u64("stepId");
  m.outputName = r.str("outputName", 211);
  m.key = r.str("key", kMaxKey);
  m.compression = r.str("compression", 16);
  m.uploadId = r.str("uploadId", kMaxKey);
  m.partSize = r.u64("partSize");
  m.urls = getStrings(r, "urls", kMaxStageParts, kMaxUrl);
  if (r.atEnd()) return;  // not a resumption
  uint32_t n = r.count("uploadedParts", kMaxStageParts, 4 + 4 + 8);
  m.uploadedParts.resize(n);
  for (auto& p : m.uploadedParts) {
    p.number = r.u32("number");
    p.etag = r.str("etag", kMaxEtag);
    p.size = r.u64("size");
  }
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
  for (auto& e : m.etags) checkEtag(c, e, "etags");
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
