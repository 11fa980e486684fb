// The libcurl functions the S3 cache and presigned uploads call, as stubs
// that load libcurl on first use (kiln/common/lazy_library.h): processes
// that never talk to S3 (`kiln instantiate`, workers) do not map libcurl
// and what it brings (gnutls, krb5, ldap, nghttp2, ssh2). curl.h gives
// them C linkage, and the compiler checks each signature against it.
#include <curl/curl.h>

#include <cstdarg>

#include "kiln/common/lazy_library.h"

namespace {
constexpr const char* kLibcurl = "libcurl.so.4";
}  // namespace

#define KILN_CURL(...) KILN_LAZY_FUNCTION(kLibcurl, __VA_ARGS__)

KILN_CURL(CURLcode, curl_global_init, (long flags), flags)
KILN_CURL(CURL*, curl_easy_init, (void), )
KILN_CURL(void, curl_easy_cleanup, (CURL * c), c)
KILN_CURL(CURLcode, curl_easy_perform, (CURL * c), c)
KILN_CURL(const char*, curl_easy_strerror, (CURLcode rc), rc)
KILN_CURL(curl_slist*, curl_slist_append, (curl_slist * l, const char* s), l, s)
KILN_CURL(void, curl_slist_free_all, (curl_slist * l), l)

// curl.h fixes their signatures: an enum before the `...`, which clang
// flags for va_start although both enums are int-sized (not promoted).
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wvarargs"
#endif

// The two variadic ones take exactly one argument after the option, whose
// type the option's number range names (curl.h's CURLOPTTYPE_*).
CURLcode curl_easy_setopt(CURL* c, CURLoption option, ...) {
  static const auto f = kiln::lazyFunction<decltype(&curl_easy_setopt)>(
      kLibcurl, "curl_easy_setopt");
  va_list ap;
  va_start(ap, option);
  CURLcode rc;
  if (option < CURLOPTTYPE_OBJECTPOINT)
    rc = f(c, option, va_arg(ap, long));
  else if (option < CURLOPTTYPE_FUNCTIONPOINT)
    rc = f(c, option, va_arg(ap, void*));
  else if (option < CURLOPTTYPE_OFF_T)
    rc = f(c, option, va_arg(ap, void (*)()));
  else if (option < CURLOPTTYPE_BLOB)
    rc = f(c, option, va_arg(ap, curl_off_t));
  else
    rc = f(c, option, va_arg(ap, void*));
  va_end(ap);
  return rc;
}

CURLcode curl_easy_getinfo(CURL* c, CURLINFO info, ...) {
  static const auto f = kiln::lazyFunction<decltype(&curl_easy_getinfo)>(
      kLibcurl, "curl_easy_getinfo");
  va_list ap;
  va_start(ap, info);
  void* out = va_arg(ap, void*);  // every CURLINFO_* takes a pointer
  va_end(ap);
  return f(c, info, out);
}
