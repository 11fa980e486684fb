// Multipart uploads of the S3 storage (binary_cache.h): the farm's own
// large uploads (putMultipart) and those a worker makes through presigned
// part URLs (startMultipart, presignPart, then completeMultipart or
// abortMultipart by the farm).
#include <algorithm>

#include "kiln/common/error.h"
#include "kiln/common/stream.h"
#include "kiln/store/binary_cache.h"
#include "kiln/store/s3_presign.h"
#include "s3_internal.h"

namespace kiln::store {

using namespace s3detail;

std::string S3CacheStorage::startMultipart(const std::string& rel) {
  checkCacheRelPath(rel);
  std::string answer;
  if (send("POST", "/" + encodePath(rel) + "?uploads=", nullptr, -1, &answer) ==
      404)
    throw Error("PUT " + rel + " in " + uri_ + ": the bucket does not exist");
  std::string id = xmlValue(answer, "UploadId");
  if (id.empty() || id.find_first_of("&?# \"<>") != std::string::npos)
    throw Error("starting a multipart upload of " + rel + " in " + uri_ +
                ": no usable UploadId in the answer");
  return id;
}

std::string S3CacheStorage::presignPart(const std::string& rel,
                                        const std::string& uploadId, int part,
                                        std::chrono::seconds expiry,
                                        int64_t nowSec) const {
  if (part < 1 || part > 10000)
    throw FormatError("a part number must be 1..10000");
  return presign(rel, expiry, nowSec,
                 {{"partNumber", std::to_string(part)}, {"uploadId", uploadId}});
}

void S3CacheStorage::completeMultipart(const std::string& rel,
                                       const std::string& uploadId,
                                       const std::vector<std::string>& etags) {
  checkCacheRelPath(rel);
  std::string parts, answer;
  for (size_t i = 0; i < etags.size(); ++i)
    parts += "<Part><PartNumber>" + std::to_string(i + 1) +
             "</PartNumber><ETag>" + etags[i] + "</ETag></Part>";
  std::string xml =
      "<CompleteMultipartUpload>" + parts + "</CompleteMultipartUpload>";
  AutoCloseFD xfd = tempFile();
  FdSink(xfd.get()).write(xml);
  Body done{xfd.get(), 0, off_t(xml.size())};
  send("POST", "/" + encodePath(rel) + "?uploadId=" + encodePath(uploadId),
       &done, -1, &answer);
  // S3 may answer 200 and still report an error in the body.
  if (answer.find("<Error>") != std::string::npos)
    throw Error("completing the upload of " + rel + " in " + uri_ + ": " +
                xmlValue(answer, "Message"));
}

void S3CacheStorage::abortMultipart(const std::string& rel,
                                    const std::string& uploadId) {
  checkCacheRelPath(rel);
  send("DELETE", "/" + encodePath(rel) + "?uploadId=" + encodePath(uploadId),
       nullptr, -1, nullptr);
}

// A large file in parts of limits_.partBytes: each part's memory is only
// curl's buffer; a failure aborts the upload, so no part is left behind.
void S3CacheStorage::putMultipart(const std::string& rel, int fd, off_t size) {
  std::string key = "/" + encodePath(rel);
  std::string id = startMultipart(rel);
  try {
    std::vector<std::string> etags;
    off_t part = off_t(std::max<uint64_t>(limits_.partBytes, 5 << 20));
    for (off_t at = 0; at < size; at += part) {
      Body b{fd, at, std::min(part, size - at)};
      std::string etag, ignored;
      send("PUT",
           key + "?partNumber=" + std::to_string(etags.size() + 1) +
               "&uploadId=" + encodePath(id),
           &b, -1, &ignored, &etag);
      if (etag.empty())
        throw Error("part " + std::to_string(etags.size() + 1) + " of " + rel +
                    " in " + uri_ + " came back without an ETag");
      etags.push_back(etag);
    }
    completeMultipart(rel, id, etags);
  } catch (...) {
    try {
      abortMultipart(rel, id);
    } catch (const Error&) {  // the original failure is what matters
    }
    throw;
  }
}

std::vector<std::pair<std::string, std::string>>
S3CacheStorage::listMultipartUploads(const std::string& prefix) {
  // Parameters in byte order: curl's SigV4 signs the query as written.
  std::string answer;
  if (send("GET", "?prefix=" + s3UriEncode(prefix, false) + "&uploads=",
           nullptr, -1, &answer) == 404)
    throw Error(uri_ + ": the bucket '" + bucket_ + "' does not exist at " +
                endpoint_);
  std::vector<std::pair<std::string, std::string>> uploads;
  for (size_t at = answer.find("<Upload>"); at != std::string::npos;
       at = answer.find("<Upload>", at + 8)) {
    auto end = answer.find("</Upload>", at);
    if (end == std::string::npos) break;
    auto entry = answer.substr(at, end - at);
    uploads.emplace_back(xmlUnescape(xmlValue(entry, "Key")),
                         xmlValue(entry, "UploadId"));
  }
  return uploads;
}

std::vector<S3CacheStorage::UploadedPart> S3CacheStorage::listParts(
    const std::string& rel, const std::string& uploadId) {
  checkCacheRelPath(rel);
  std::string answer;
  long status = send("GET", "/" + encodePath(rel) + "?uploadId=" +
                                encodePath(uploadId),
                     nullptr, -1, &answer);
  if (status == 404 || answer.find("<Error>") != std::string::npos)
    throw Error("no multipart upload " + uploadId + " of " + rel + " in " +
                uri_);
  std::vector<UploadedPart> parts;
  for (size_t at = answer.find("<Part>"); at != std::string::npos;
       at = answer.find("<Part>", at + 6)) {
    auto end = answer.find("</Part>", at);
    if (end == std::string::npos) break;
    auto entry = answer.substr(at, end - at);
    UploadedPart p;
    try {
      p.number = std::stoi(xmlValue(entry, "PartNumber"));
      p.size = std::stoull(xmlValue(entry, "Size"));
    } catch (const std::exception&) {
      continue;  // not a part this listing can use: uploaded again
    }
    p.etag = xmlUnescape(xmlValue(entry, "ETag"));
    if (p.number >= 1 && p.number <= 10000 && !p.etag.empty())
      parts.push_back(std::move(p));
  }
  return parts;
}

}  // namespace kiln::store
