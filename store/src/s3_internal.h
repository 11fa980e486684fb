#pragma once
// Pieces shared by the S3 storage's files (s3_cache_storage.cc,
// s3_multipart.cc).

#include <cstddef>
#include <string>

#include "kiln/common/file.h"

namespace kiln::store::s3detail {

/// An unnamed temporary file under $TMPDIR (gone when closed).
AutoCloseFD tempFile();
/// `rel` with every byte but unreserved ones and '/' percent-encoded.
std::string encodePath(const std::string& rel);
/// The contents of the first <tag>...</tag> of `xml`, or "".
std::string xmlValue(const std::string& xml, const std::string& tag);
/// `text` with the five XML entities decoded.
std::string xmlUnescape(const std::string& text);
/// curl read callback: the request body from its range of a file
/// (`p` is an S3CacheStorage::Body).
size_t fromRange(char* data, size_t size, size_t n, void* p);
/// curl header callback: keeps the ETag header's value in the
/// std::string `p`.
size_t etagHeader(char* data, size_t size, size_t n, void* p);

}  // namespace kiln::store::s3detail
