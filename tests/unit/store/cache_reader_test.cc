// Malformed and untrusted inputs for BinaryCacheReader: each gives a clear
// error before the NAR's last byte is handed to a consumer.
#include <gtest/gtest.h>

#include <filesystem>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/binary_cache.h"
#include "test_support.h"
#include "vector_cache_copy.h"

namespace kiln::store {
namespace {

const StorePath kMain("7zzljlcf6mdzr5g1358ry3rlgcm8kbf3-ref-main");
const StorePath kDep2("ckrdyfyx6vjdwgz3rncr0zv5h74mn99y-ref-dep2");
const StorePath kSource("xfp2hphvk98rkk9ywlqpp587rjdcgnc2-hello.txt");
const StorePath kFlat("iixxin28s82lrxs8v4lcf7nha2dkwprm-hello.txt");
const StorePath kText("9p0nl625gm5mli8h2xfsgma0zz31g9yc-t.txt");

/// Reads the NAR byte by byte; returns the error and how many bytes were
/// handed out before it.
std::pair<std::string, uint64_t> readUntilError(BinaryCacheReader& r,
                                                const NarInfo& ni) {
  uint64_t n = 0;
  try {
    auto src = r.narSource(ni);
    char c;
    while (src->read(&c, 1) == 1) ++n;
  } catch (const FormatError& e) {
    return {e.what(), n};
  }
  return {"", n};
}

void expectNarError(CacheCopy& c, const StorePath& p, const std::string& what) {
  FileCacheStorage storage(c.root());
  BinaryCacheReader reader(storage, StoreDir());
  auto ni = reader.queryNarInfo(p);
  ASSERT_TRUE(ni);
  auto [err, delivered] = readUntilError(reader, *ni);
  EXPECT_NE(err.find(what), std::string::npos) << "error: '" << err << "'";
  EXPECT_NE(err.find(p.baseName()), std::string::npos) << err;
  EXPECT_LT(delivered, ni->narSize);
}

TEST(CacheReader, TruncatedCompressedData) {
  CacheCopy c("cache-xz");
  auto nar = c.root() + "/" + c.field(kMain, "URL");
  auto data = readFile(nar);
  writeFile(nar, data.substr(0, data.size() - 20));
  expectNarError(c, kMain, "truncated");
}

TEST(CacheReader, CorruptCompressedData) {
  CacheCopy c("cache-xz");
  auto nar = c.root() + "/" + c.field(kMain, "URL");
  auto data = readFile(nar);
  data[data.size() / 2] ^= 0x20;
  writeFile(nar, data);
  expectNarError(c, kMain, "xz data is corrupt");
}

// Each row edits one field of ref-main's narinfo in a fresh copy.
TEST(CacheReader, WrongFileAndNarHashesAndSizes) {
  struct Case {
    const char* cache;
    const char* key;
    std::string value;
    const char* error;
  };
  auto other = hashString(HashAlgo::kSha256, "x").toNix32();
  for (const auto& k : std::vector<Case>{
           {"cache-xz", "FileHash", other, "FileHash says"},
           {"cache-xz", "FileSize", "333", "FileSize says"},
           {"cache-none", "NarHash", other, "NarHash says"},
           {"cache-none", "NarSize", "401", "truncated"},
           {"cache-xz", "NarSize", "399", "longer than NarSize"}}) {
    SCOPED_TRACE(std::string(k.cache) + " " + k.key);
    CacheCopy c(k.cache);
    c.setField(kMain, k.key, k.value);
    expectNarError(c, kMain, k.error);
  }
}

TEST(CacheReader, MalformedNarInfos) {
  CacheCopy c("cache-none");
  FileCacheStorage storage(c.root());
  BinaryCacheReader reader(storage, StoreDir());
  c.setField(kMain, "URL", "../../etc/passwd");
  EXPECT_THROW(reader.queryNarInfo(kMain), FormatError);
  c.setField(kMain, "StorePath", "/nix/store/" + kDep2.baseName());
  try {
    reader.queryNarInfo(kMain);
    ADD_FAILURE();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("describes"), std::string::npos)
        << e.what();
  }
  c.removeField(kDep2, "NarHash");
  try {
    reader.queryNarInfo(kDep2);
    ADD_FAILURE();
  } catch (const FormatError& e) {
    EXPECT_NE(
        std::string(e.what()).find("is corrupt: required field 'NarHash'"),
        std::string::npos)
        << e.what();
  }
  CacheCopy d("cache-none");
  FileCacheStorage s2(d.root());
  BinaryCacheReader r2(s2, StoreDir());
  d.setField(kDep2, "Compression", "bzip2");
  auto ni = r2.queryNarInfo(kDep2);
  EXPECT_THROW(r2.narSource(*ni), FormatError);
  std::filesystem::remove(d.root() + "/" + d.field(kMain, "URL"));
  EXPECT_THROW(r2.narSource(*r2.queryNarInfo(kMain)), Error);
}

void expectUntrusted(CacheCopy& c, const StorePath& p, const CacheTrust& trust,
                     const std::string& what) {
  FileCacheStorage storage(c.root());
  BinaryCacheReader reader(storage, StoreDir());
  auto ni = reader.queryNarInfo(p);
  ASSERT_TRUE(ni);
  try {
    reader.checkTrusted(*ni, trust);
    ADD_FAILURE() << p.baseName() << " was trusted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

CacheTrust vectorTrust() {
  CacheTrust t;
  t.keys.add(readPublicKeyFile(test::vectorPath("cache/public.key")));
  return t;
}

TEST(CacheReader, SignaturesDecideTrust) {
  CacheCopy c("cache-none");
  // Right key: fine. Same bytes under another name, or no keys: refused.
  FileCacheStorage storage(c.root());
  BinaryCacheReader reader(storage, StoreDir());
  reader.checkTrusted(*reader.queryNarInfo(kMain), vectorTrust());
  CacheTrust renamed;
  renamed.keys.add(PublicKey(
      "other", readPublicKeyFile(test::vectorPath("cache/public.key")).key()));
  expectUntrusted(c, kMain, renamed, "lacks a valid signature");
  expectUntrusted(c, kMain, CacheTrust{}, "no trusted public keys");
  // Tampered metadata: the signature no longer covers it.
  c.setField(kDep2, "NarSize", "121");
  expectUntrusted(c, kDep2, vectorTrust(), "lacks a valid signature");
  // Unsigned input-addressed path: refused; with requireSigs off: accepted.
  c.removeField(kMain, "Sig");
  expectUntrusted(c, kMain, vectorTrust(), "lacks a valid signature");
  CacheTrust lax;
  lax.requireSigs = false;
  reader.checkTrusted(*reader.queryNarInfo(kMain), lax);
}

TEST(CacheReader, UnsignedContentAddressedPathsAreCheckedByPath) {
  CacheCopy c("cache-none");
  FileCacheStorage storage(c.root());
  BinaryCacheReader reader(storage, StoreDir());
  CacheTrust none;
  for (auto& p : {kSource, kFlat, kText}) {
    c.removeField(p, "Sig");
    reader.checkTrusted(*reader.queryNarInfo(p), none);  // CA reproduces it
  }
  // A CA field that gives another path. (Content is checked when the
  // store registers it: cache_copy_test.cc.)
  c.setField(kSource, "CA", "fixed:r:sha256:" + std::string(52, '0'));
  expectUntrusted(c, kSource, none, "gives the path");
}

}  // namespace
}  // namespace kiln::store
