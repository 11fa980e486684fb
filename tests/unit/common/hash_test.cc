#include "kiln/common/hash.h"

#include <gtest/gtest.h>

#include "kiln/common/encoding.h"
#include "kiln/common/error.h"
#include "test_support.h"

namespace kiln {
namespace {

// Every row of spec/vectors/hashes/hashes.tsv, in every encoding.
TEST(HashVectors, AllRowsAllEncodings) {
  auto rows = test::readTsv(test::vectorPath("hashes/hashes.tsv"));
  ASSERT_GT(rows.size(), 10u);
  for (size_t i = 1; i < rows.size(); ++i) {
    auto& r = rows[i];
    ASSERT_EQ(r.size(), 8u) << "row " << i;
    std::string input = r[0] == "-" ? "" : base16Decode(r[0]);
    auto algo = parseHashAlgo(r[1]);
    ASSERT_TRUE(algo) << r[1];
    Hash h = hashString(*algo, input);
    EXPECT_EQ(h.to(HashFormat::kBase16, false), r[2]);
    EXPECT_EQ(h.to(HashFormat::kNix32, false), r[3]);
    EXPECT_EQ(h.to(HashFormat::kBase64, false), r[4]);
    EXPECT_EQ(h.to(HashFormat::kSri), r[5]);
    // nix-hash --truncate folds only hashes longer than 20 bytes.
    std::string folded = h.size() > 20 ? foldHash(h) : std::string(h.bytes());
    EXPECT_EQ(base16Encode(folded), r[6]);
    EXPECT_EQ(nix32Encode(folded), r[7]);
    // Every printed form parses back.
    for (int c = 2; c <= 4; ++c) {
      EXPECT_EQ(Hash::parse(r[1] + ":" + r[c]), h) << r[c];
      EXPECT_EQ(Hash::parse(r[c], *algo), h) << r[c];
    }
    EXPECT_EQ(Hash::parse(r[5]), h);
  }
}

TEST(Hash, ParseAcceptsUpperHexAndUnpaddedSri) {
  auto h = hashString(HashAlgo::kSha256, "hello");
  std::string upper = h.toHex();
  for (auto& c : upper) c = static_cast<char>(toupper(c));
  EXPECT_EQ(Hash::parse("sha256:" + upper), h);
  EXPECT_EQ(Hash::parse("sha256-LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ"), h);
}

TEST(Hash, ParseRejectsBadInput) {
  EXPECT_THROW(Hash::parse("SHA256:abc"), FormatError);
  EXPECT_THROW(Hash::parse("sha256:abc"), FormatError);  // wrong length
  EXPECT_THROW(Hash::parse("abc"), FormatError);         // no type
  // nix32 with bits beyond 256: top digit must be 0 or 1.
  EXPECT_THROW(
      Hash::parse("sha256:z94qif9n4cq4fdg459qzbhg1c6wywawwaaivx0k0x8xhbyx4vwic"),
      FormatError);
  // 'e' is not in the nix32 alphabet.
  EXPECT_THROW(
      Hash::parse("sha256:e94qif9n4cq4fdg459qzbhg1c6wywawwaaivx0k0x8xhbyx4vwic"),
      FormatError);
  EXPECT_THROW(Hash::parse("md5:d41d8cd98f00b204e9800998ecf8427e", HashAlgo::kSha1),
               FormatError);
  EXPECT_THROW(Hash::parse("sha256-!!!!"), FormatError);
}

TEST(Hash, FoldOfHelloMatchesSpec) {
  auto h = hashString(HashAlgo::kSha256, "hello");
  EXPECT_EQ(base16Encode(foldHash(h)), "33550fe42cb4906cb563a30ec5b9e29e1b161e5c");
  EXPECT_EQ(nix32Encode(foldHash(h)), "bhg1c6wywawwa3m3cfsnr45l5kj0ym9k");
}

TEST(HashSink, IncrementalEqualsOneShot) {
  HashSink s(HashAlgo::kSha512);
  s.update("hel");
  s.update("lo");
  EXPECT_EQ(s.bytesHashed(), 5u);
  EXPECT_EQ(s.finish(), hashString(HashAlgo::kSha512, "hello"));
}

// hashString and HashSink share one digest (the low-level functions for
// SHA-1/256/512, EVP for MD5): fed in two pieces split anywhere, a sink
// must agree with the one-shot digest on empty input, partial blocks and
// several blocks.
TEST(HashString, AgreesWithStreamingForEveryAlgoAndLength) {
  for (HashAlgo algo : {HashAlgo::kMd5, HashAlgo::kSha1, HashAlgo::kSha256, HashAlgo::kSha512}) {
    for (size_t n : {0, 1, 55, 56, 64, 111, 112, 128, 1000}) {
      std::string data(n, 'x');
      for (size_t i = 0; i < n; ++i) data[i] = static_cast<char>('a' + i % 26);
      HashSink s(algo);
      s.update(std::string_view(data).substr(0, n / 3));
      s.update(std::string_view(data).substr(n / 3));
      EXPECT_EQ(hashString(algo, data), s.finish()) << hashAlgoName(algo) << " " << n;
    }
  }
}

// The published test vectors (RFC 1321, FIPS 180-2) for "" and "abc".
TEST(HashString, MatchesThePublishedVectors) {
  const struct {
    HashAlgo algo;
    const char *empty, *abc;
  } vectors[] = {
      {HashAlgo::kMd5, "d41d8cd98f00b204e9800998ecf8427e", "900150983cd24fb0d6963f7d28e17f72"},
      {HashAlgo::kSha1, "da39a3ee5e6b4b0d3255bfef95601890afd80709",
       "a9993e364706816aba3e25717850c26c9cd0d89d"},
      {HashAlgo::kSha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
       "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {HashAlgo::kSha512,
       "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce"
       "47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e",
       "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
       "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"},
  };
  for (const auto& v : vectors) {
    EXPECT_EQ(hashString(v.algo, "").toHex(), v.empty) << hashAlgoName(v.algo);
    EXPECT_EQ(hashString(v.algo, "abc").toHex(), v.abc) << hashAlgoName(v.algo);
  }
}

// Every byte value is written as its two hex digits (a pair table).
TEST(Encoding, Base16WritesEveryByteAsItsTwoDigits) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  std::string hex = base16Encode(all);
  ASSERT_EQ(hex.size(), 512u);
  EXPECT_EQ(hex.substr(0, 8), "00010203");
  EXPECT_EQ(hex.substr(2 * 0x7e, 8), "7e7f8081");
  EXPECT_EQ(hex.substr(496), "f8f9fafbfcfdfeff");
  EXPECT_EQ(base16Decode(hex), all);
  std::string out = "sha256:";
  appendBase16(out, "\xab\x01");
  EXPECT_EQ(out, "sha256:ab01");
}

// The block paths (16 bytes of hex, 40 bits of nix32 a step) write what
// one digit at a time by the definition does, at every length and offset.
TEST(Encoding, BlockEncodersAgreeWithTheDigitDefinitions) {
  const char* kNix = "0123456789abcdfghijklmnpqrsvwxyz";
  uint32_t seed = 12345;
  for (size_t n = 0; n <= 70; ++n) {
    for (int round = 0; round < 4; ++round) {
      std::string bytes;
      for (size_t i = 0; i < n; ++i) {
        seed = seed * 1103515245u + 12345u;
        bytes += static_cast<char>(round == 1 ? 0xff : round == 2 ? 0 : seed >> 16);
      }
      std::string hex, nix;
      for (unsigned char c : bytes) {
        hex += "0123456789abcdef"[c >> 4];
        hex += "0123456789abcdef"[c & 15];
      }
      for (size_t k = nix32Length(n); k-- > 0;) {  // Nix's printHash32
        size_t b = k * 5, i = b / 8, j = b % 8;
        unsigned v = static_cast<unsigned char>(bytes[i]) >> j;
        if (i + 1 < n) v |= static_cast<unsigned char>(bytes[i + 1]) << (8 - j);
        nix += kNix[v & 31];
      }
      std::string out = "x";
      appendBase16(out, bytes);
      EXPECT_EQ(out, "x" + hex) << n;
      out = "y";
      appendNix32(out, bytes);
      EXPECT_EQ(out, "y" + nix) << n;
      EXPECT_EQ(nix32Decode(nix, n), bytes) << n;
    }
  }
}

// Digits are looked up by byte in tables: every byte value, bytes above
// 0x7f included, is a digit exactly when the alphabet has it.
TEST(Encoding, DigitTablesAcceptExactlyTheirAlphabets) {
  const std::string hex = "0123456789abcdefABCDEF", nix32 = "0123456789abcdfghijklmnpqrsvwxyz";
  for (int i = 0; i < 256; ++i) {
    char c = static_cast<char>(i);
    bool isHex = hex.find(c) != std::string::npos;
    if (isHex) {
      int v = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
      EXPECT_EQ(base16Decode(std::string{'0', c}), std::string(1, static_cast<char>(v))) << i;
      EXPECT_EQ(base16Decode(std::string{c, '0'}), std::string(1, static_cast<char>(v << 4))) << i;
    } else {
      EXPECT_THROW(base16Decode(std::string{'0', c}), FormatError) << i;
    }
    // Two nix32 digits hold one byte; the first (top) digit takes bits 5-7.
    size_t at = nix32.find(c);
    if (at != std::string::npos)
      EXPECT_EQ(nix32Decode(std::string{'0', c}, 1), std::string(1, static_cast<char>(at))) << i;
    else
      EXPECT_THROW(nix32Decode(std::string{'0', c}, 1), FormatError) << i;
  }
}

}  // namespace
}  // namespace kiln
