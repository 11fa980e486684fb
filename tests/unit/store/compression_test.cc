#include "kiln/store/compression.h"

#include <gtest/gtest.h>

#include <random>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln::store {
namespace {

std::string sampleData(size_t n) {
  std::mt19937 rng(42);
  std::string s;
  s.reserve(n);
  // Half compressible text, half noise, so codecs produce several blocks.
  while (s.size() < n) {
    if (rng() % 2)
      s += "the quick brown fox " + std::to_string(rng() % 100) + "\n";
    else
      for (int i = 0; i < 64; ++i) s += static_cast<char>(rng());
  }
  s.resize(n);
  return s;
}

std::string compress(const std::string& method, const std::string& data) {
  StringSink out;
  auto c = makeCompressionSink(method, out);
  // Feed in uneven chunks.
  for (size_t pos = 0; pos < data.size(); pos += 7777)
    c->write(std::string_view(data).substr(pos, 7777));
  c->finish();
  return out.s;
}

std::string decompress(const std::string& method, const std::string& data) {
  StringSource in(data);
  auto d = makeDecompressionSource(method, in);
  StringSink out;
  d->drainInto(out);
  return out.s;
}

TEST(Compression, RoundTripsEveryMethod) {
  auto data = sampleData(3 << 20);
  for (std::string m : {"none", "xz", "zstd"}) {
    auto c = compress(m, data);
    if (m != "none") {
      EXPECT_LT(c.size(), data.size()) << m;
    }
    EXPECT_EQ(decompress(m, c), data) << m;
    EXPECT_EQ(decompress(m, compress(m, "")), "") << m;
  }
  EXPECT_EQ(compressionExtension("xz"), ".xz");
  EXPECT_EQ(compressionExtension("zstd"), ".zst");
  EXPECT_EQ(compressionExtension("none"), "");
}

TEST(Compression, ReadsNixXzOutput) {
  auto xz = readFile(test::vectorPath(
      "cache/cache-xz/nar/"
      "0rgwrc49zijcvz2jw9lhsxz8ja7afm3420pyk4i6825y4znmah39.nar.xz"));
  auto nar = readFile(test::vectorPath(
      "cache/cache-none/nar/"
      "0dg4kp7ziqj1gh39lv6d8cwip6by858rli3fgi3sa0xk6rxycd2f.nar"));
  EXPECT_EQ(decompress("xz", xz), nar);
}

void expectFormatError(const std::string& m, const std::string& data,
                       const std::string& what) {
  try {
    decompress(m, data);
    ADD_FAILURE() << m << " accepted bad data";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(Compression, TruncatedAndCorruptDataAreErrors) {
  auto data = sampleData(1 << 20);
  for (std::string m : {"xz", "zstd"}) {
    auto c = compress(m, data);
    expectFormatError(m, c.substr(0, c.size() / 2), "truncated");
    expectFormatError(m, c.substr(0, c.size() - 1), m);
    expectFormatError(m, "", "truncated");
    auto bad = c;
    bad[bad.size() / 2] ^= 0x55;
    bad[bad.size() / 2 + 1] ^= 0x55;
    expectFormatError(m, bad, "corrupt");
    expectFormatError(m, "not compressed at all", "corrupt");
  }
}

uint32_t crc32(std::string_view d) {
  uint32_t c = 0xffffffff;
  for (unsigned char b : d) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320 & (0u - (c & 1)));
  }
  return ~c;
}

// An xz stream whose first block header claims an LZMA2 dictionary of
// 4 GiB (dictionary byte 40), with a valid header CRC: liblzma would
// allocate that much before decoding a byte.
std::string craftedXz() {
  std::string xz = compress("xz", "hello");
  size_t h = 12;  // after the stream header
  size_t size = (static_cast<uint8_t>(xz[h]) + 1) * 4;
  uint8_t flags = static_cast<uint8_t>(xz[h + 1]);
  size_t p = h + 2;
  auto skipVarint = [&] {
    while (static_cast<uint8_t>(xz[p++]) & 0x80) {
    }
  };
  if (flags & 0x40) skipVarint();
  if (flags & 0x80) skipVarint();
  EXPECT_EQ(xz[p], 0x21);  // LZMA2
  EXPECT_EQ(xz[p + 1], 1);  // one property byte
  xz[p + 2] = 40;
  uint32_t crc = crc32(std::string_view(xz).substr(h, size - 4));
  for (int i = 0; i < 4; ++i) xz[h + size - 4 + i] = static_cast<char>(crc >> (8 * i));
  return xz;
}

TEST(Compression, DecodersStayWithinTheMemoryLimit) {
  std::string evil = craftedXz();
  for (uint64_t limit : {DecompressionLimits::kDefaultMemory, uint64_t{1} << 30}) {
    StringSource in(evil);
    auto d = makeDecompressionSource("xz", in, {limit});
    StringSink out;
    try {
      d->drainInto(out);
      ADD_FAILURE() << "a 4 GiB dictionary was accepted";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("more than the decompression memory limit of " +
                                           std::to_string(limit >> 20) + " MiB"),
                std::string::npos)
          << e.what();
    }
  }
  // A normal xz -6 stream needs ~9 MiB: refused under 4 MiB, read under
  // the default.
  std::string data = sampleData(1 << 20);
  std::string xz = compress("xz", data);
  StringSource small(xz);
  auto d = makeDecompressionSource("xz", small, {4u << 20});
  StringSink out;
  EXPECT_THROW(d->drainInto(out), FormatError);
  EXPECT_EQ(decompress("xz", xz), data);
  // zstd frames asking for a larger window than the limit are refused.
  StringSink z;
  auto big = makeCompressionSink("zstd", z, 19);  // level 19: 8 MiB window
  big->write(sampleData(16 << 20));
  big->finish();
  StringSource zin(z.s);
  auto zd = makeDecompressionSource("zstd", zin, {1u << 20});
  StringSink zout;
  EXPECT_THROW(zd->drainInto(zout), FormatError);
}

TEST(Compression, UnsupportedMethodsAreNamed) {
  StringSink s;
  StringSource in("");
  EXPECT_THROW(makeCompressionSink("bzip2", s), FormatError);
  EXPECT_THROW(makeDecompressionSource("br", in), FormatError);
  try {
    checkCompression("gzip");
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("'gzip'"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln::store
