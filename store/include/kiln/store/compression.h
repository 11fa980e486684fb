#pragma once
/// Streaming compression for binary-cache NAR files: `none`, `xz` (liblzma)
/// and `zstd` (libzstd). Memory stays bounded by the codec's window, never
/// by the data size.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kiln/common/stream.h"

namespace kiln::store {

/// Throws FormatError unless kiln can read and write `method` ("none", "xz",
/// "zstd"); the message lists the supported methods.
void checkCompression(std::string_view method);

/// The file-name extension Nix uses for `method` (".xz", ".zst", "").
std::string compressionExtension(std::string_view method);

/// A sink that compresses everything written to it into `next` (borrowed).
/// finish() must be called once at the end to flush the codec; data written
/// without finish() is an incomplete stream.
class CompressionSink : public Sink {
 public:
  /// Flushes the codec's remaining output into the next sink.
  virtual void finish() = 0;
};

/// A compressing sink for `method`; throws FormatError for an unsupported
/// method. `level` < 0 picks the codec's default (xz 6, zstd 3).
std::unique_ptr<CompressionSink> makeCompressionSink(std::string_view method,
                                                     Sink& next,
                                                     int level = -1);

/// Bounds on what a decoder may allocate, whatever the stream's headers
/// ask for.
struct DecompressionLimits {
  /// Default memory limit: an xz stream made with `xz -9` needs ~65 MiB,
  /// Nix's default (-6) ~9 MiB; zstd's default window limit is 128 MiB.
  static constexpr uint64_t kDefaultMemory = uint64_t{128} << 20;
  /// Most memory the decoder may use (xz: liblzma's memlimit; zstd: the
  /// largest window, rounded down to a power of two). At least 1 MiB.
  uint64_t memory = kDefaultMemory;
};

/// A source that decompresses `in` (borrowed). Reads throw FormatError on
/// corrupt data, on a stream that ends before the codec's end marker
/// ("truncated") and on a stream that needs more memory than
/// `limits.memory` ("… more than the decompression memory limit …"),
/// before that memory is allocated. Throws FormatError for an unsupported
/// method.
std::unique_ptr<Source> makeDecompressionSource(
    std::string_view method, Source& in,
    const DecompressionLimits& limits = {});

}  // namespace kiln::store
