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
