#pragma once
/// Presigned S3 requests: AWS Signature Version 4 in the query string
/// ("Authenticating Requests: Using Query Parameters"), so that a holder of
/// the URL alone (a worker, stage 2 of issue 32) may make exactly that
/// request until it expires, without the farm's credentials. libcurl signs
/// the requests kiln makes itself (CURLOPT_AWS_SIGV4); it cannot presign a
/// URL for someone else, hence this.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::store {

/// What a presigned URL allows.
struct PresignRequest {
  std::string method = "GET";  ///< e.g. PUT for an upload
  /// The endpoint: `http(s)://HOST[:PORT]` (path-style: the bucket is the
  /// first component of the path) or a virtual-hosted bucket's
  /// `https://BUCKET.s3.amazonaws.com`.
  std::string endpoint;
  /// The object's path below the endpoint, unencoded (`/bucket/staging/x`);
  /// encoded here as S3 wants (each byte but unreserved ones and '/').
  std::string path;
  std::string region = "us-east-1";
  std::string accessKey;
  std::string secretKey;
  /// The signing time, `YYYYMMDDTHHMMSSZ` (UTC).
  std::string amzDate;
  /// Seconds the URL stays valid (1..604800).
  int64_t expiresSec = 900;
  /// Further query parameters the URL carries, signed with it (a part of
  /// a multipart upload: `partNumber`, `uploadId`), unencoded.
  std::vector<std::pair<std::string, std::string>> query;
};

/// The full URL (`endpoint` + encoded path + `?X-Amz-Algorithm=…&
/// X-Amz-Signature=…`) signing only the Host header and an unsigned
/// payload (the object's content is checked after upload, not by the
/// signature). Throws FormatError for a malformed endpoint, date or expiry.
std::string presignUrl(const PresignRequest& r);

/// `s` URI-encoded as SigV4 and S3 keys want: unreserved characters
/// (letters, digits, `-_.~`) kept, '/' kept when `keepSlash`, every other
/// byte `%XX` (upper-case hex).
std::string s3UriEncode(std::string_view s, bool keepSlash);

/// The UTC time `unixSec` as `YYYYMMDDTHHMMSSZ`.
std::string amzDate(int64_t unixSec);

/// PUTs `length` bytes of `fd` from `offset` to presigned URL `url` (no
/// credentials needed; memory is curl's buffer), giving up on a stall of
/// `stallSec`. Returns the response's ETag (a multipart part's). Throws
/// Error naming the URL's path (not its signature) and the HTTP status
/// for a failure or a refusal.
std::string putPresigned(const std::string& url, int fd, int64_t offset,
                         int64_t length, long stallSec = 60);

}  // namespace kiln::store
