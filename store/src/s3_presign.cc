// SigV4 query-string presigning (s3_presign.h), as AWS documents it:
// canonical request → string to sign → HMAC chain of the date, region,
// service and "aws4_request" → signature.
#include "kiln/store/s3_presign.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <regex>

#include "kiln/common/error.h"

namespace kiln::store {
namespace {

std::string hex(const unsigned char* data, size_t n) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kHex[data[i] >> 4];
    out += kHex[data[i] & 15];
  }
  return out;
}

std::string sha256Hex(const std::string& s) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d);
  return hex(d, sizeof d);
}

std::string hmac(const std::string& key, const std::string& data) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), int(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), d, &n);
  return std::string(reinterpret_cast<char*>(d), n);
}

}  // namespace

std::string s3UriEncode(std::string_view s, bool keepSlash) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keepSlash && c == '/')) {
      out += char(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string amzDate(int64_t unixSec) {
  std::time_t t = std::time_t(unixSec);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

std::string presignUrl(const PresignRequest& r) {
  static const std::regex endpointRe(R"(https?://([A-Za-z0-9.-]+(:[0-9]+)?))");
  static const std::regex dateRe(R"([0-9]{8}T[0-9]{6}Z)");
  std::smatch m;
  if (!std::regex_match(r.endpoint, m, endpointRe))
    throw FormatError("'" + r.endpoint + "' is not http(s)://HOST[:PORT]");
  if (!std::regex_match(r.amzDate, dateRe))
    throw FormatError("'" + r.amzDate + "' is not YYYYMMDDTHHMMSSZ");
  if (r.expiresSec < 1 || r.expiresSec > 604800)
    throw FormatError("a presigned URL's expiry must be 1..604800 seconds");
  if (!r.path.starts_with("/"))
    throw FormatError("'" + r.path + "' does not start with '/'");
  std::string host = m[1];
  std::string day = r.amzDate.substr(0, 8);
  std::string scope = day + "/" + r.region + "/s3/aws4_request";
  // Sorted by name, as the canonical query string must be.
  std::vector<std::pair<std::string, std::string>> params = {
      {"X-Amz-Algorithm", "AWS4-HMAC-SHA256"},
      {"X-Amz-Credential", r.accessKey + "/" + scope},
      {"X-Amz-Date", r.amzDate},
      {"X-Amz-Expires", std::to_string(r.expiresSec)},
      {"X-Amz-SignedHeaders", "host"}};
  for (auto& [k, v] : r.query) params.emplace_back(k, v);
  std::sort(params.begin(), params.end());
  std::string query;
  for (auto& [k, v] : params)
    query += (query.empty() ? "" : "&") + s3UriEncode(k, false) + "=" +
             s3UriEncode(v, false);
  std::string path = s3UriEncode(r.path, true);
  std::string canonical = r.method + "\n" + path + "\n" + query +
                          "\nhost:" + host + "\n\nhost\nUNSIGNED-PAYLOAD";
  std::string toSign = "AWS4-HMAC-SHA256\n" + r.amzDate + "\n" + scope + "\n" +
                       sha256Hex(canonical);
  std::string key =
      hmac(hmac(hmac(hmac("AWS4" + r.secretKey, day), r.region), "s3"),
           "aws4_request");
  std::string sig = hmac(key, toSign);
  return r.endpoint + path + "?" + query + "&X-Amz-Signature=" +
         hex(reinterpret_cast<const unsigned char*>(sig.data()), sig.size());
}

}  // namespace kiln::store
