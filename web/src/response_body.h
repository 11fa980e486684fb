#pragma once
// The server's side of a response: the header text it writes and the file
// a `Response::file` names, opened and cut to the requested range.

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/common/file.h"
#include "kiln/web/http.h"

namespace kiln::web {

/// A file body ready to send: [offset, offset + length) of `fd`.
struct FileBody {
  AutoCloseFD fd;
  uint64_t offset = 0;
  uint64_t length = 0;
};

/// Opens `resp.filePath` (no symlink in its last component, a regular
/// file) and applies the request's `Range` (one range of bytes; several
/// or unparsable ones are ignored and the whole file is sent). Turns
/// `resp` into a 404 when the file is missing, a 416 when the range starts
/// past its end, a 206 with Content-Range for a range. Returns the body to
/// send, or nullopt when `resp` is now an error with a plain body.
std::optional<FileBody> openFileBody(const Request& req, Response& resp);

/// The status line and headers of `resp` (Content-Type, its own headers,
/// Content-Length `length` or chunked when `chunked`, Connection), ending
/// with the blank line. CR and LF in handler-given values are replaced.
std::string headerText(const Response& resp, uint64_t length, bool chunked,
                       bool keepAlive, bool http11);

/// A parsed `Range: bytes=...` against a file of `size` bytes.
struct ByteRange {
  uint64_t first = 0;
  uint64_t last = 0;  ///< inclusive
};
/// nullopt when `header` is empty, not a single byte range, or malformed
/// (the whole file is sent); a range with first > last when it cannot be
/// satisfied (416).
std::optional<ByteRange> parseRange(const std::string& header, uint64_t size);

}  // namespace kiln::web
