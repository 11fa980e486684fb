#include "kiln/store/compression.h"

#include <lzma.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "kiln/common/error.h"

namespace kiln::store {
namespace {

constexpr size_t kChunk = 64 * 1024;

class NoneSink : public CompressionSink {
 public:
  explicit NoneSink(Sink& next) : next_(next) {}
  void write(std::string_view d) override { next_.write(d); }
  void finish() override {}

 private:
  Sink& next_;
};

class XzSink : public CompressionSink {
 public:
  XzSink(Sink& next, int level) : next_(next) {
    if (lzma_easy_encoder(&strm_, level < 0 ? 6 : static_cast<uint32_t>(level),
                          LZMA_CHECK_CRC64) != LZMA_OK)
      throw Error("cannot initialise the xz encoder");
  }
  ~XzSink() override { lzma_end(&strm_); }
  void write(std::string_view d) override { run(d, LZMA_RUN); }
  void finish() override { run({}, LZMA_FINISH); }

 private:
  void run(std::string_view d, lzma_action action) {
    strm_.next_in = reinterpret_cast<const uint8_t*>(d.data());
    strm_.avail_in = d.size();
    while (true) {
      strm_.next_out = out_;
      strm_.avail_out = sizeof out_;
      auto ret = lzma_code(&strm_, action);
      if (ret != LZMA_OK && ret != LZMA_STREAM_END)
        throw Error("xz compression failed (code " + std::to_string(ret) + ")");
      next_.write(
          {reinterpret_cast<char*>(out_), sizeof out_ - strm_.avail_out});
      if (ret == LZMA_STREAM_END) return;
      if (action == LZMA_RUN && strm_.avail_in == 0 && strm_.avail_out != 0)
        return;
    }
  }
  Sink& next_;
  lzma_stream strm_ = LZMA_STREAM_INIT;
  uint8_t out_[kChunk];
};

class ZstdSink : public CompressionSink {
 public:
  ZstdSink(Sink& next, int level) : next_(next), ctx_(ZSTD_createCCtx()) {
    if (!ctx_) throw Error("cannot initialise the zstd encoder");
    ZSTD_CCtx_setParameter(ctx_, ZSTD_c_compressionLevel,
                           level < 0 ? 3 : level);
  }
  ~ZstdSink() override { ZSTD_freeCCtx(ctx_); }
  void write(std::string_view d) override { run(d, ZSTD_e_continue); }
  void finish() override { run({}, ZSTD_e_end); }

 private:
  void run(std::string_view d, ZSTD_EndDirective mode) {
    ZSTD_inBuffer in{d.data(), d.size(), 0};
    while (true) {
      ZSTD_outBuffer out{out_, sizeof out_, 0};
      size_t left = ZSTD_compressStream2(ctx_, &out, &in, mode);
      if (ZSTD_isError(left))
        throw Error(std::string("zstd compression failed: ") +
                    ZSTD_getErrorName(left));
      next_.write({out_, out.pos});
      bool done = mode == ZSTD_e_end ? left == 0 : in.pos == in.size;
      if (done) return;
    }
  }
  Sink& next_;
  ZSTD_CCtx* ctx_;
  char out_[kChunk];
};

/// Shared input buffering for the decoders.
class DecoderBase : public Source {
 protected:
  explicit DecoderBase(Source& in) : in_(in) {}
  /// Refills the input buffer when empty; returns false at end of input.
  bool refill() {
    if (inPos_ < inEnd_) return true;
    if (eof_) return false;
    inPos_ = 0;
    inEnd_ = in_.read(inBuf_, sizeof inBuf_);
    if (inEnd_ == 0) eof_ = true;
    return !eof_;
  }
  Source& in_;
  char inBuf_[kChunk];
  size_t inPos_ = 0, inEnd_ = 0;
  bool eof_ = false;
  bool done_ = false;
};

class XzSource : public DecoderBase {
 public:
  XzSource(Source& in, uint64_t memLimit) : DecoderBase(in), limit_(memLimit) {
    if (lzma_stream_decoder(&strm_, memLimit, LZMA_CONCATENATED) != LZMA_OK)
      throw Error("cannot initialise the xz decoder");
  }
  ~XzSource() override { lzma_end(&strm_); }
  size_t read(char* data, size_t len) override {
    if (done_ || len == 0) return 0;
    strm_.next_out = reinterpret_cast<uint8_t*>(data);
    strm_.avail_out = len;
    while (strm_.avail_out == len) {
      bool more = refill();
      strm_.next_in = reinterpret_cast<const uint8_t*>(inBuf_ + inPos_);
      strm_.avail_in = inEnd_ - inPos_;
      auto ret = lzma_code(&strm_, more ? LZMA_RUN : LZMA_FINISH);
      inPos_ = inEnd_ - strm_.avail_in;
      if (ret == LZMA_STREAM_END) {
        done_ = true;
        break;
      }
      if (ret == LZMA_BUF_ERROR ||
          (!more && ret == LZMA_OK && strm_.avail_out == len))
        throw FormatError("xz data is truncated");
      if (ret == LZMA_MEMLIMIT_ERROR)
        throw FormatError(
            "xz data needs " + std::to_string(lzma_memusage(&strm_) >> 20) +
            " MiB to decode, more than the decompression memory limit of " +
            std::to_string(limit_ >> 20) + " MiB");
      if (ret != LZMA_OK)
        throw FormatError("xz data is corrupt (liblzma code " +
                          std::to_string(ret) + ")");
    }
    return len - strm_.avail_out;
  }

 private:
  lzma_stream strm_ = LZMA_STREAM_INIT;
  uint64_t limit_;
};

class ZstdSource : public DecoderBase {
 public:
  ZstdSource(Source& in, uint64_t memLimit)
      : DecoderBase(in), ctx_(ZSTD_createDCtx()) {
    if (!ctx_) throw Error("cannot initialise the zstd decoder");
    int log = 10;  // ZSTD_WINDOWLOG_ABSOLUTEMIN
    while (log < 31 && (uint64_t{1} << (log + 1)) <= memLimit) ++log;
    ZSTD_DCtx_setParameter(ctx_, ZSTD_d_windowLogMax, log);
  }
  ~ZstdSource() override { ZSTD_freeDCtx(ctx_); }
  size_t read(char* data, size_t len) override {
    if (done_ || len == 0) return 0;
    ZSTD_outBuffer out{data, len, 0};
    while (out.pos == 0) {
      bool more = refill();
      if (!more && started_ && pending_ == 0) {
        done_ = true;
        return 0;
      }
      ZSTD_inBuffer in{inBuf_ + inPos_, more ? inEnd_ - inPos_ : 0, 0};
      pending_ = ZSTD_decompressStream(ctx_, &out, &in);
      inPos_ += in.pos;
      started_ = true;
      if (ZSTD_isError(pending_))
        throw FormatError(std::string("zstd data is corrupt: ") +
                          ZSTD_getErrorName(pending_));
      if (!more && out.pos == 0) throw FormatError("zstd data is truncated");
    }
    return out.pos;
  }

 private:
  ZSTD_DCtx* ctx_;
  size_t pending_ = 0;
  bool started_ = false;
};

class NoneSource : public Source {
 public:
  explicit NoneSource(Source& in) : in_(in) {}
  size_t read(char* d, size_t len) override { return in_.read(d, len); }

 private:
  Source& in_;
};

}  // namespace

void checkCompression(std::string_view method) {
  if (method != "none" && method != "xz" && method != "zstd")
    throw FormatError("unsupported compression '" + std::string(method) +
                      "' (kiln supports none, xz and zstd)");
}

std::string compressionExtension(std::string_view method) {
  checkCompression(method);
  if (method == "xz") return ".xz";
  if (method == "zstd") return ".zst";
  return "";
}

std::unique_ptr<CompressionSink> makeCompressionSink(std::string_view method,
                                                     Sink& next, int level) {
  checkCompression(method);
  if (method == "xz") return std::make_unique<XzSink>(next, level);
  if (method == "zstd") return std::make_unique<ZstdSink>(next, level);
  return std::make_unique<NoneSink>(next);
}

std::unique_ptr<Source> makeDecompressionSource(
    std::string_view method, Source& in, const DecompressionLimits& limits) {
  checkCompression(method);
  uint64_t mem = std::max<uint64_t>(limits.memory, uint64_t{1} << 20);
  if (method == "xz") return std::make_unique<XzSource>(in, mem);
  if (method == "zstd") return std::make_unique<ZstdSource>(in, mem);
  return std::make_unique<NoneSource>(in);
}

}  // namespace kiln::store
