// CacheStorage on an S3 object store (binary_cache.h): path-style requests
// signed by libcurl's AWS SigV4 (no signing of ours), bodies through
// anonymous temporary files so that memory stays bounded.
#include <curl/curl.h>
#include <fcntl.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/binary_cache.h"
#include "kiln/store/s3_presign.h"
#include "s3_internal.h"

namespace kiln::store {
namespace s3detail {

// An unnamed temporary file (gone when closed).
AutoCloseFD tempFile() {
  const char* dir = std::getenv("TMPDIR");
  std::string d = dir && *dir ? dir : "/tmp";
  AutoCloseFD fd(::open(d.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd) throwSysError("creating a temporary file in " + d);
  return fd;
}

// `rel` with every byte but unreserved ones and '/' percent-encoded.
std::string encodePath(const std::string& rel) {
  return s3UriEncode(rel, true);
}

size_t toFd(char* data, size_t size, size_t n, void* fd) {
  const char* p = data;
  size_t left = size * n;
  while (left > 0) {
    ssize_t w = ::write(*static_cast<int*>(fd), p, left);
    if (w <= 0) return 0;  // curl fails the transfer
    p += w;
    left -= size_t(w);
  }
  return size * n;
}

// Reads the request body from its range of a file.
size_t fromRange(char* data, size_t size, size_t n, void* p) {
  auto* b = static_cast<S3CacheStorage::Body*>(p);
  size_t want = size_t(std::min<off_t>(off_t(size * n), b->length));
  if (want == 0) return 0;
  ssize_t r = ::pread(b->fd, data, want, b->offset);
  if (r <= 0) return CURL_READFUNC_ABORT;
  b->offset += r;
  b->length -= r;
  return size_t(r);
}

// Keeps the response's ETag header (a multipart upload's part).
size_t etagHeader(char* data, size_t size, size_t n, void* p) {
  std::string line(data, size * n);
  if (line.size() > 5 && strncasecmp(line.c_str(), "etag:", 5) == 0) {
    auto v = line.substr(5);
    v.erase(0, v.find_first_not_of(" \t"));
    while (!v.empty() && (v.back() == '\r' || v.back() == '\n')) v.pop_back();
    *static_cast<std::string*>(p) = v;
  }
  return size * n;
}

// The contents of the first <tag>...</tag> of `xml`, or "".
std::string xmlValue(const std::string& xml, const std::string& tag) {
  auto open = xml.find("<" + tag + ">");
  auto close = xml.find("</" + tag + ">");
  if (open == std::string::npos || close == std::string::npos) return "";
  open += tag.size() + 2;
  return close > open ? xml.substr(open, close - open) : "";
}

// `text` with the five XML entities decoded (a listing's keys).
std::string xmlUnescape(const std::string& text) {
  static const std::pair<const char*, char> kEntities[] = {{"&amp;", '&'},
                                                           {"&lt;", '<'},
                                                           {"&gt;", '>'},
                                                           {"&quot;", '"'},
                                                           {"&apos;", '\''}};
  std::string out;
  for (size_t i = 0; i < text.size();) {
    bool replaced = false;
    for (auto& [name, c] : kEntities) {
      if (text.compare(i, std::strlen(name), name) == 0) {
        out += c;
        i += std::strlen(name);
        replaced = true;
        break;
      }
    }
    if (!replaced) out += text[i++];
  }
  return out;
}

}  // namespace s3detail

namespace {

using namespace s3detail;
using Curl = std::unique_ptr<CURL, decltype(&curl_easy_cleanup)>;
using Headers = std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)>;

// An upload into a temporary file, PUT at commit.
class S3Upload : public CacheUpload {
 public:
  explicit S3Upload(S3CacheStorage& s3)
      : s3_(s3), fd_(tempFile()), sink_(fd_.get()) {}
  void write(std::string_view data) override { sink_.write(data); }
  void commit(const std::string& rel) override {
    sink_.flush();
    s3_.putFile(rel, fd_.get());
  }

 private:
  S3CacheStorage& s3_;
  AutoCloseFD fd_;
  FdSink sink_;
};

// The credentials: the environment's AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY, else the shared credentials file's profile.
std::pair<std::string, std::string> credentials(const std::string& uri) {
  const char* id = std::getenv("AWS_ACCESS_KEY_ID");
  const char* secret = std::getenv("AWS_SECRET_ACCESS_KEY");
  if (id && *id && secret && *secret) return {id, secret};
  const char* file = std::getenv("AWS_SHARED_CREDENTIALS_FILE");
  const char* home = std::getenv("HOME");
  std::string path = file && *file ? file
                     : home        ? std::string(home) + "/.aws/credentials"
                                   : "";
  const char* profile = std::getenv("AWS_PROFILE");
  std::string want =
      "[" + std::string(profile && *profile ? profile : "default") + "]";
  std::ifstream in(path);
  std::map<std::string, std::string> keys;
  bool inProfile = false;
  for (std::string line; std::getline(in, line);) {
    line.erase(0, line.find_first_not_of(" \t"));
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r'))
      line.pop_back();
    if (!line.empty() && line[0] == '[') inProfile = line == want;
    auto eq = line.find('=');
    if (!inProfile || eq == std::string::npos) continue;
    std::string k = line.substr(0, line.find_last_not_of(" \t", eq - 1) + 1);
    std::string v =
        line.substr(line.find_first_not_of(" \t", eq + 1) == std::string::npos
                        ? line.size()
                        : line.find_first_not_of(" \t", eq + 1));
    keys[k] = v;
  }
  if (!keys["aws_access_key_id"].empty() &&
      !keys["aws_secret_access_key"].empty())
    return {keys["aws_access_key_id"], keys["aws_secret_access_key"]};
  throw Error("no S3 credentials for " + uri +
              ": set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give them "
              "in a credentials file (AWS_SHARED_CREDENTIALS_FILE, default "
              "~/.aws/credentials, profile AWS_PROFILE or 'default')");
}

}  // namespace

namespace {

// The parts of an `s3://` URI.
struct S3Uri {
  std::string bucket, endpoint, region = "us-east-1";
};

S3Uri parseS3Uri(const std::string& uri) {
  static const std::regex re(
      R"(s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(\?(.*))?)");
  std::smatch m;
  if (!std::regex_match(uri, m, re))
    throw FormatError("'" + uri +
                      "' is not s3://BUCKET?endpoint=http://HOST:PORT"
                      "[&region=REGION] (a bucket of 3-63 lower-case letters, "
                      "digits, '.' and '-')");
  S3Uri out;
  out.bucket = m[1];
  std::string query = m[3];
  size_t pos = 0;
  while (pos < query.size()) {
    size_t amp = query.find('&', pos);
    std::string pair = query.substr(pos, amp - pos);
    pos = amp == std::string::npos ? query.size() : amp + 1;
    auto eq = pair.find('=');
    std::string k = pair.substr(0, eq),
                v = eq == std::string::npos ? "" : pair.substr(eq + 1);
    if (k == "endpoint")
      out.endpoint = v;
    else if (k == "region")
      out.region = v;
    else
      throw FormatError("'" + uri + "': unknown parameter '" + k +
                        "' (endpoint and region are known)");
  }
  auto& ep = out.endpoint;
  if (!(ep.starts_with("http://") || ep.starts_with("https://")))
    throw FormatError("'" + uri + "' needs endpoint=http(s)://HOST[:PORT]");
  while (ep.size() > 8 && ep.back() == '/') ep.pop_back();
  if (out.region.empty() ||
      out.region.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") !=
          std::string::npos)
    throw FormatError("'" + uri + "': region '" + out.region +
                      "' is not a region name");
  return out;
}

}  // namespace

void S3CacheStorage::checkUri(const std::string& uri) { parseS3Uri(uri); }

S3CacheStorage::S3CacheStorage(std::string uri, HttpCacheLimits limits)
    : uri_(std::move(uri)), limits_(limits) {
  auto parsed = parseS3Uri(uri_);
  bucket_ = parsed.bucket;
  endpoint_ = parsed.endpoint;
  region_ = parsed.region;
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::tie(accessKey_, secretKey_) = credentials(uri_);
}

long S3CacheStorage::request(const std::string& method, const std::string& rel,
                             Body* in, int out, std::string* small) {
  checkCacheRelPath(rel);
  return send(method, "/" + encodePath(rel), in, out, small);
}

// One request on `target` (below the bucket: "/key", or "?policy="); the
// response body goes to `out` (a file descriptor, or -1: into `small`, at
// most maxSmallFileBytes); `in` (or -1) is the body sent.
long S3CacheStorage::send(const std::string& method, const std::string& rel,
                          Body* in, int out, std::string* small,
                          std::string* etag, const std::string& extraHeader) {
  Curl c(curl_easy_init(), &curl_easy_cleanup);
  if (!c) throw Error("curl_easy_init failed");
  std::string url = endpoint_ + "/" + bucket_ + rel;
  std::string sigv4 = "aws:amz:" + region_ + ":s3";
  std::string user = accessKey_ + ":" + secretKey_;
  Headers h(
      curl_slist_append(nullptr, "x-amz-content-sha256: UNSIGNED-PAYLOAD"),
      &curl_slist_free_all);
  if (!extraHeader.empty())
    h.reset(curl_slist_append(h.release(), extraHeader.c_str()));
  curl_easy_setopt(c.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(c.get(), CURLOPT_AWS_SIGV4, sigv4.c_str());
  curl_easy_setopt(c.get(), CURLOPT_USERPWD, user.c_str());
  curl_easy_setopt(c.get(), CURLOPT_HTTPHEADER, h.get());
  curl_easy_setopt(c.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c.get(), CURLOPT_CONNECTTIMEOUT,
                   long(limits_.timeout.count()));
  curl_easy_setopt(c.get(), CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c.get(), CURLOPT_LOW_SPEED_TIME,
                   long(limits_.timeout.count()));
  curl_easy_setopt(
      c.get(), CURLOPT_MAXFILESIZE_LARGE,
      curl_off_t(out >= 0 ? limits_.maxFileBytes : limits_.maxSmallFileBytes));
  AutoCloseFD smallFd;
  if (out < 0) {
    smallFd = tempFile();
    out = smallFd.get();
  }
  curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, toFd);
  curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &out);
  if (method == "HEAD") curl_easy_setopt(c.get(), CURLOPT_NOBODY, 1L);
  if (in) {
    curl_easy_setopt(c.get(), CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c.get(), CURLOPT_READFUNCTION, fromRange);
    curl_easy_setopt(c.get(), CURLOPT_READDATA, in);
    curl_easy_setopt(c.get(), CURLOPT_INFILESIZE_LARGE, curl_off_t(in->length));
  } else if (method == "POST") {
    curl_easy_setopt(c.get(), CURLOPT_POST, 1L);
    curl_easy_setopt(c.get(), CURLOPT_POSTFIELDSIZE, 0L);
  }
  if (method != "GET" && method != "HEAD" && method != "PUT")
    curl_easy_setopt(c.get(), CURLOPT_CUSTOMREQUEST, method.c_str());
  if (etag) {
    curl_easy_setopt(c.get(), CURLOPT_HEADERFUNCTION, etagHeader);
    curl_easy_setopt(c.get(), CURLOPT_HEADERDATA, etag);
  }
  CURLcode rc = curl_easy_perform(c.get());
  if (rc != CURLE_OK)
    throw Error(method + " " + rel + " in " + uri_ + ": " +
                curl_easy_strerror(rc));
  long status = 0;
  curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &status);
  if (smallFd) {
    ::lseek(smallFd.get(), 0, SEEK_SET);
    StringSink sink;
    FdSource(smallFd.get()).drainInto(sink);
    if (small) *small = std::move(sink.s);
  }
  if (status == 404 && small &&
      small->find("<Code>NoSuchBucket</Code>") != std::string::npos)
    throw Error(uri_ + ": the bucket '" + bucket_ + "' does not exist at " +
                endpoint_);
  if (status == 403)
    throw Error(method + " " + rel + " in " + uri_ +
                ": access denied (403): check the credentials "
                "(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY) and the bucket '" +
                bucket_ + "' at " + endpoint_);
  if ((status < 200 || status > 299) && status != 404)
    throw Error(method + " " + rel + " in " + uri_ + ": HTTP status " +
                std::to_string(status) +
                (small && !small->empty() ? ": " + small->substr(0, 500) : ""));
  return status;
}

bool S3CacheStorage::exists(const std::string& rel) {
  return request("HEAD", rel, nullptr, -1, nullptr) != 404;
}

std::optional<std::string> S3CacheStorage::get(const std::string& rel) {
  std::string body;
  if (request("GET", rel, nullptr, -1, &body) == 404) return std::nullopt;
  return body;
}

std::unique_ptr<Source> S3CacheStorage::open(const std::string& rel) {
  AutoCloseFD fd = tempFile();
  if (request("GET", rel, nullptr, fd.get(), nullptr) == 404) return nullptr;
  ::lseek(fd.get(), 0, SEEK_SET);
  return std::make_unique<OwnedFdSource>(std::move(fd));
}

std::unique_ptr<CacheUpload> S3CacheStorage::upload() {
  return std::make_unique<S3Upload>(*this);
}

void S3CacheStorage::makePublicRead() {
  std::string arn = "arn:aws:s3:::" + bucket_;
  std::string policy =
      R"({"Version":"2012-10-17","Statement":[{"Effect":"Allow",)"
      R"("Principal":"*","Action":["s3:GetObject","s3:ListBucket"],)"
      R"("Resource":[")" +
      arn + R"(",")" + arn + R"(/*"]}]})";
  AutoCloseFD fd = tempFile();
  FdSink sink(fd.get());
  sink.write(policy);
  sink.flush();
  std::string answer;
  Body body{fd.get(), 0, off_t(policy.size())};
  // "?policy=" (with '='): what radosgw expects curl's SigV4 to sign.
  if (send("PUT", "?policy=", &body, -1, &answer) == 404)
    throw Error(uri_ + ": the bucket '" + bucket_ + "' does not exist at " +
                endpoint_);
}

void S3CacheStorage::copy(const std::string& from, const std::string& to) {
  checkCacheRelPath(from);
  checkCacheRelPath(to);
  std::string answer;
  // An empty body makes curl PUT (without one it would GET); the answer is
  // bounded by the small-file limit: the object is copied, not fetched.
  Body none{-1, 0, 0};
  long status = send("PUT", "/" + encodePath(to), &none, -1, &answer, nullptr,
                     "x-amz-copy-source: /" + bucket_ + "/" + encodePath(from));
  if (status == 404)
    throw Error("copying " + from + " to " + to + " in " + uri_ + ": " + from +
                " does not exist");
  // S3 may answer 200 and still report an error in the body.
  if (answer.find("<Error>") != std::string::npos)
    throw Error("copying " + from + " to " + to + " in " + uri_ + ": " +
                xmlValue(answer, "Message"));
}

void S3CacheStorage::remove(const std::string& rel) {
  request("DELETE", rel, nullptr, -1, nullptr);
}

std::vector<CacheObject> S3CacheStorage::listObjects(const std::string& prefix,
                                                     size_t limit) {
  std::vector<CacheObject> objects;
  std::string token;
  while (objects.size() < limit) {
    std::string query =
        "?list-type=2&max-keys=1000&prefix=" + s3UriEncode(prefix, false);
    if (!token.empty())
      query += "&continuation-token=" + s3UriEncode(token, false);
    std::string answer;
    if (send("GET", query, nullptr, -1, &answer) == 404)
      throw Error(uri_ + ": the bucket '" + bucket_ + "' does not exist at " +
                  endpoint_);
    for (size_t at = answer.find("<Contents>"); at != std::string::npos;
         at = answer.find("<Contents>", at + 10)) {
      auto end = answer.find("</Contents>", at);
      if (end == std::string::npos) break;
      auto entry = answer.substr(at, end - at);
      auto size = xmlValue(entry, "Size");
      uint64_t bytes = 0;
      std::from_chars(size.data(), size.data() + size.size(), bytes);
      objects.push_back({xmlUnescape(xmlValue(entry, "Key")), bytes});
      if (objects.size() == limit) break;
    }
    if (xmlValue(answer, "IsTruncated") != "true") break;
    token = xmlUnescape(xmlValue(answer, "NextContinuationToken"));
    if (token.empty()) break;
  }
  return objects;
}

std::vector<std::string> S3CacheStorage::list(const std::string& prefix,
                                              size_t limit) {
  std::vector<std::string> keys;
  for (auto& o : listObjects(prefix, limit)) keys.push_back(std::move(o.key));
  return keys;
}

size_t S3CacheStorage::removePrefix(const std::string& prefix) {
  size_t n = 0;
  for (auto& key : list(prefix)) {
    remove(key);
    ++n;
  }
  return n;
}

std::string S3CacheStorage::presignPut(const std::string& rel,
                                       std::chrono::seconds expiry,
                                       int64_t nowSec) const {
  return presign(rel, expiry, nowSec, {});
}

std::string S3CacheStorage::presign(
    const std::string& rel, std::chrono::seconds expiry, int64_t nowSec,
    std::vector<std::pair<std::string, std::string>> query) const {
  checkCacheRelPath(rel);
  PresignRequest r;
  r.method = "PUT";
  r.endpoint = endpoint_;
  r.path = "/" + bucket_ + "/" + rel;
  r.region = region_;
  r.accessKey = accessKey_;
  r.secretKey = secretKey_;
  r.amzDate = amzDate(nowSec);
  r.expiresSec = expiry.count();
  r.query = std::move(query);
  return presignUrl(r);
}

void S3CacheStorage::putFile(const std::string& rel, int fd) {
  checkCacheRelPath(rel);
  off_t size = ::lseek(fd, 0, SEEK_END);
  if (size < 0) throwSysError("measuring an upload to " + uri_);
  if (uint64_t(size) > limits_.multipartThreshold)
    return putMultipart(rel, fd, size);
  Body body{fd, 0, size};
  if (request("PUT", rel, &body, -1, nullptr) == 404)
    throw Error("PUT " + rel + " in " + uri_ + ": the bucket does not exist");
}

}  // namespace kiln::store
