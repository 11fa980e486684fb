// A PUT to a presigned URL (s3_presign.h): what a worker does with the
// URLs of a StageGrant, holding no credentials.
#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "kiln/common/error.h"
#include "kiln/store/binary_cache.h"
#include "kiln/store/s3_presign.h"
#include "s3_internal.h"

namespace kiln::store {
namespace {

using s3detail::etagHeader;
using s3detail::fromRange;

// Keeps at most 4 KiB of the response body (an S3 error document).
size_t keepBody(char* data, size_t size, size_t n, void* p) {
  auto* s = static_cast<std::string*>(p);
  if (s->size() < 4096) s->append(data, std::min(size * n, 4096 - s->size()));
  return size * n;
}

// The URL without its query (the signature stays out of messages).
std::string withoutQuery(const std::string& url) {
  return url.substr(0, url.find('?'));
}

}  // namespace

std::string putPresigned(const std::string& url, int fd, int64_t offset,
                         int64_t length, long stallSec) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> c(curl_easy_init(),
                                                        &curl_easy_cleanup);
  if (!c) throw Error("curl_easy_init failed");
  S3CacheStorage::Body range{fd, off_t(offset), off_t(length)};
  std::string body, etag;
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> h(
      curl_slist_append(nullptr, "Expect:"), &curl_slist_free_all);
  curl_easy_setopt(c.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(c.get(), CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(c.get(), CURLOPT_HTTPHEADER, h.get());
  curl_easy_setopt(c.get(), CURLOPT_READFUNCTION, fromRange);
  curl_easy_setopt(c.get(), CURLOPT_READDATA, &range);
  curl_easy_setopt(c.get(), CURLOPT_INFILESIZE_LARGE, curl_off_t(length));
  curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, keepBody);
  curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(c.get(), CURLOPT_HEADERFUNCTION, etagHeader);
  curl_easy_setopt(c.get(), CURLOPT_HEADERDATA, &etag);
  curl_easy_setopt(c.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c.get(), CURLOPT_CONNECTTIMEOUT, stallSec);
  curl_easy_setopt(c.get(), CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c.get(), CURLOPT_LOW_SPEED_TIME, stallSec);
  CURLcode rc = curl_easy_perform(c.get());
  if (rc != CURLE_OK)
    throw Error("PUT " + withoutQuery(url) + ": " + curl_easy_strerror(rc));
  long status = 0;
  curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status > 299)
    throw Error("PUT " + withoutQuery(url) + ": HTTP status " +
                std::to_string(status) + (body.empty() ? "" : ": " + body));
  return etag;
}

}  // namespace kiln::store
