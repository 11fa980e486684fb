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

// hashString takes the low-level one-shot functions for SHA-1/256/512 and
// EVP for MD5; every algorithm must agree with the EVP streaming path on
// empty input, partial blocks and several blocks.
TEST(HashString, AgreesWithStreamingForEveryAlgoAndLength) {
  for (HashAlgo algo : {HashAlgo::kMd5, HashAlgo::kSha1, HashAlgo::kSha256, HashAlgo::kSha512}) {
    for (size_t n : {0, 1, 55, 56, 64, 111, 112, 128, 1000}) {
      std::string data(n, 'x');
      for (size_t i = 0; i < n; ++i) data[i] = static_cast<char>('a' + i % 26);
      HashSink s(algo);
      s.update(data);
      EXPECT_EQ(hashString(algo, data), s.finish()) << hashAlgoName(algo) << " " << n;
    }
  }
}

}  // namespace
}  // namespace kiln
