#include "kiln/store/narinfo.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/content_address.h"
#include "test_support.h"

namespace kiln::store {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> vectorNarInfos() {
  std::vector<std::string> out;
  for (auto cache : {"cache/cache-none", "cache/cache-xz"})
    for (auto& e : fs::directory_iterator(test::vectorPath(cache)))
      if (e.path().extension() == ".narinfo") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Every narinfo Nix wrote parses and is written back byte for byte.
TEST(NarInfoVectors, RoundTripByteForByte) {
  auto files = vectorNarInfos();
  ASSERT_EQ(files.size(), 13u);
  StoreDir sd;
  for (auto& f : files) {
    auto text = readFile(f);
    auto ni = NarInfo::parse(sd, text, f);
    EXPECT_EQ(ni.render(sd), text) << f;
    EXPECT_EQ(narInfoFileName(ni.path), baseNameOf(f));
  }
}

TEST(NarInfoVectors, FieldsOfTheSourcePath) {
  StoreDir sd;
  auto f = test::vectorPath(
      "cache/cache-none/xfp2hphvk98rkk9ywlqpp587rjdcgnc2.narinfo");
  auto ni = NarInfo::parse(sd, readFile(f), f);
  EXPECT_EQ(sd.printPath(ni.path),
            "/nix/store/xfp2hphvk98rkk9ywlqpp587rjdcgnc2-hello.txt");
  EXPECT_EQ(ni.compression, "none");
  EXPECT_EQ(ni.narSize, 120u);
  EXPECT_TRUE(ni.references.empty());
  EXPECT_FALSE(ni.deriver);
  ASSERT_EQ(ni.sigs.size(), 1u);
  auto ca = ContentAddress::parse(ni.ca);
  EXPECT_EQ(ca.render(), ni.ca);
  EXPECT_EQ(ca.makePath(sd, ni.path.name(), ni.references, false), ni.path);
}

const char* kGood =
    "StorePath: /nix/store/ckrdyfyx6vjdwgz3rncr0zv5h74mn99y-ref-dep2\n"
    "URL: nar/18kydfw4sigxv2s42vn7iv7dl70sqjsgf0d4h0449k0ms4hwr35r.nar\n"
    "NarHash: sha256:18kydfw4sigxv2s42vn7iv7dl70sqjsgf0d4h0449k0ms4hwr35r\n"
    "NarSize: 120\n";

TEST(NarInfo, MissingCompressionMeansBzip2AndUnknownKeysAreIgnored) {
  StoreDir sd;
  auto ni = NarInfo::parse(sd, std::string(kGood) + "Frobnicate: yes\n", "x");
  EXPECT_EQ(ni.compression, "bzip2");
  EXPECT_FALSE(ni.fileHash);
  EXPECT_FALSE(ni.fileSize);
}

void expectCorrupt(const std::string& text, const std::string& reason) {
  StoreDir sd;
  try {
    NarInfo::parse(sd, text, "cache/x.narinfo");
    ADD_FAILURE() << "accepted:\n" << text;
  } catch (const FormatError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("NAR info file 'cache/x.narinfo' is corrupt"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find(reason), std::string::npos) << msg;
  }
}

std::string without(const std::string& key) {
  std::string s = kGood;
  auto at = s.find(key + ":");
  return s.erase(at, s.find('\n', at) - at + 1);
}

TEST(NarInfo, RejectsMissingRequiredFields) {
  for (auto key : {"StorePath", "URL", "NarHash", "NarSize"})
    expectCorrupt(without(key), std::string("'") + key + "' is missing");
}

TEST(NarInfo, RejectsMalformedFields) {
  std::string g = kGood;
  expectCorrupt(g + "NarSize: 12x\n", "twice");
  expectCorrupt(without("NarSize") + "NarSize: 12x\n", "not a non-negative");
  expectCorrupt(without("NarSize") + "NarSize: -1\n", "not a non-negative");
  expectCorrupt(without("NarSize") + "NarSize: 0\n", "NarSize is 0");
  expectCorrupt(without("NarSize") + "NarSize: 99999999999999999999999\n",
                "not a non-negative");
  expectCorrupt(without("NarHash") + "NarHash: sha256:zzzz\n", "NarHash");
  expectCorrupt(
      without("NarHash") +
          "NarHash: 18kydfw4sigxv2s42vn7iv7dl70sqjsgf0d4h0449k0ms4hwr35r\n",
      "prefix");
  expectCorrupt(
      without("StorePath") +
          "StorePath: /usr/store/ckrdyfyx6vjdwgz3rncr0zv5h74mn99y-x\n",
      "not in the Nix store");
  expectCorrupt(
      without("StorePath") +
          "StorePath: /nix/store/ckrdyfyx6vjdwgz3rncr0zv5h74mn99y-a b\n",
      "illegal character");
  expectCorrupt(g + "References: ../../etc/passwd\n", "base name");
  expectCorrupt(g + "Deriver: ckrdyfyx6vjdwgz3rncr0zv5h74mn99y-foo\n",
                "not a .drv");
  expectCorrupt(g + "FileHash: md5:zz\n", "FileHash");
  expectCorrupt(g + "FileSize: ten\n", "FileSize");
  expectCorrupt(g + "Sig: nocolon\n", "signature");
  expectCorrupt(g + "Sig: k:aGVsbG8=\n", "bytes instead of 64");
  expectCorrupt(g + "CA: fixed:sha257:abc\n", "unknown hash algorithm");
  expectCorrupt(g + "CA: blob:sha256:abc\n", "does not start with");
  expectCorrupt(g + "Compression: X Z\n", "unexpected character");
  expectCorrupt(g + "garbage line\n", "is not 'Key: value'");
  expectCorrupt(g.substr(0, g.size() - 1), "does not end in a newline");
}

TEST(NarInfo, WritesInNixOrder) {
  StoreDir sd;
  NarInfo ni;
  ni.path = StorePath("ckrdyfyx6vjdwgz3rncr0zv5h74mn99y-ref-dep2");
  ni.url = "nar/a.nar.zst";
  ni.compression = "zstd";
  ni.fileHash = hashString(HashAlgo::kSha256, "f");
  ni.fileSize = 7;
  ni.narHash = hashString(HashAlgo::kSha256, "n");
  ni.narSize = 9;
  ni.references = {StorePath("r4zq3683nfggrd8h6qiyddxw5v63hc3v-b"),
                   StorePath("7zzljlcf6mdzr5g1358ry3rlgcm8kbf3-a")};
  ni.sigs = {"z:sig", "a:sig"};
  ni.ca = "fixed:r:sha256:" + ni.narHash.to(HashFormat::kNix32, false);
  auto text = ni.render(sd);
  EXPECT_EQ(text,
            "StorePath: /nix/store/ckrdyfyx6vjdwgz3rncr0zv5h74mn99y-ref-dep2\n"
            "URL: nar/a.nar.zst\nCompression: zstd\n"
            "FileHash: " +
                ni.fileHash->toNix32() +
                "\nFileSize: 7\n"
                "NarHash: " +
                ni.narHash.toNix32() +
                "\nNarSize: 9\n"
                "References: 7zzljlcf6mdzr5g1358ry3rlgcm8kbf3-a "
                "r4zq3683nfggrd8h6qiyddxw5v63hc3v-b\n"
                "Sig: a:sig\nSig: z:sig\n"
                "CA: " +
                ni.ca + "\n");
  ni.fileSize.reset();
  EXPECT_THROW(ni.render(sd), Error);
}

TEST(ContentAddress, ParsesAndRejects) {
  auto ca = ContentAddress::parse(
      "text:sha256:094qif9n4cq4fdg459qzbhg1c6wywawwaaivx0k0x8xhbyx4vwic");
  EXPECT_EQ(ca.method, CaMethod::kText);
  StoreDir sd;
  EXPECT_EQ(sd.printPath(ca.makePath(sd, "t.txt", {}, false)),
            "/nix/store/9p0nl625gm5mli8h2xfsgma0zz31g9yc-t.txt");
  EXPECT_THROW(ca.makePath(sd, "t.txt", {}, true), FormatError);
  EXPECT_THROW(ContentAddress::parse("text:md5:3y8bwfr609h3lh9ch0izcqq7fl"),
               FormatError);
  EXPECT_THROW(ContentAddress::parse("fixed:sha256"), FormatError);
  EXPECT_THROW(ContentAddress::parse("fixed:sha256:xyz"), FormatError);
}

}  // namespace
}  // namespace kiln::store
