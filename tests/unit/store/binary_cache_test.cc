#include "kiln/store/binary_cache.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/compression.h"
#include "test_support.h"

namespace kiln::store {
namespace {

namespace fs = std::filesystem;

std::string vec(const std::string& rel) {
  return test::vectorPath("cache/" + rel);
}

PublicKeys vectorKeys() {
  PublicKeys k;
  k.add(readPublicKeyFile(vec("public.key")));
  return k;
}

std::vector<StorePath> narInfoPaths(const std::string& dir) {
  std::vector<StorePath> out;
  StoreDir sd;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".narinfo")
      out.push_back(
          NarInfo::parse(sd, readFile(e.path()), e.path().string()).path);
  std::sort(out.begin(), out.end());
  return out;
}

std::string drain(Source& s) {
  StringSink out;
  s.drainInto(out);
  return out.s;
}

// Nix's caches read, verify and decompress; the NARs agree across caches.
TEST(BinaryCacheVectors, ReadBothCaches) {
  StoreDir sd;
  CacheTrust trust{vectorKeys()};
  for (auto cache : {"cache-none", "cache-xz"}) {
    FileCacheStorage storage(vec(cache));
    BinaryCacheReader reader(storage, sd);
    EXPECT_EQ(reader.init().storeDir, "/nix/store");
    auto paths = narInfoPaths(vec(cache));
    ASSERT_FALSE(paths.empty());
    for (auto& p : paths) {
      auto ni = reader.queryNarInfo(p);
      ASSERT_TRUE(ni);
      EXPECT_TRUE(reader.hasValidSignature(*ni, trust.keys));
      reader.checkTrusted(*ni, trust);
      auto nar = drain(*reader.narSource(*ni));
      EXPECT_EQ(nar.size(), ni->narSize);
      EXPECT_EQ(hashString(HashAlgo::kSha256, nar), ni->narHash);
    }
  }
  FileCacheStorage storage(vec("cache-xz"));
  BinaryCacheReader reader(storage, sd);
  EXPECT_EQ(
      reader.getLog(StorePath("1f9nikx99nf5g4kx0i5iv2wn3fw50zqk-ref-main.drv")),
      std::string());
  EXPECT_FALSE(reader.getLog(
      StorePath("2f9nikx99nf5g4kx0i5iv2wn3fw50zqk-ref-main.drv")));
  EXPECT_FALSE(
      reader.queryNarInfo(StorePath("2f9nikx99nf5g4kx0i5iv2wn3fw50zqk-x")));
}

// kiln's writer, fed Nix's NARs and the test key, reproduces every narinfo
// of the uncompressed cache byte for byte, and the xz cache's listings.
TEST(BinaryCacheVectors, WriterReproducesNixNarInfos) {
  StoreDir sd;
  auto key = readSecretKeyFile(vec("secret.key"));
  TempDir tmp;
  for (std::string compression : {"none", "xz", "zstd"}) {
    FileCacheStorage out(tmp.path() + "/" + compression);
    CacheWriteOptions wo;
    wo.compression = compression;
    wo.signingKey = &key;
    wo.writeListing = true;
    BinaryCacheWriter writer(out, sd, wo);
    writer.init();
    EXPECT_EQ(readFile(out.root() + "/nix-cache-info"),
              "StoreDir: /nix/store\n");
    for (auto& p : narInfoPaths(vec("cache-none"))) {
      auto file = vec("cache-none/" + narInfoFileName(p));
      auto nixInfo = NarInfo::parse(sd, readFile(file), file);
      auto nar = readFile(vec("cache-none/" + nixInfo.url));
      NarInfo meta = nixInfo;
      meta.sigs.clear();
      auto written = writer.addPath(meta, [&](Sink& s) { s.write(nar); });
      auto text = readFile(out.root() + "/" + narInfoFileName(p));
      EXPECT_EQ(text, written.render(sd));
      if (compression == "none") {
        EXPECT_EQ(text, readFile(file)) << p.baseName();
      } else {
        EXPECT_EQ(written.sigs, nixInfo.sigs);  // Ed25519 is deterministic
        EXPECT_TRUE(written.url.ends_with(compressionExtension(compression)));
      }
      auto ls = vec("cache-xz/" + std::string(p.hashPart()) + ".ls");
      if (pathExists(ls)) {
        EXPECT_EQ(
            readFile(out.root() + "/" + std::string(p.hashPart()) + ".ls"),
            readFile(ls));
      }
      // And kiln's reader accepts what kiln wrote.
      BinaryCacheReader reader(out, sd);
      auto back = reader.queryNarInfo(p);
      ASSERT_TRUE(back);
      reader.checkTrusted(*back, CacheTrust{vectorKeys()});
      EXPECT_EQ(drain(*reader.narSource(*back)), nar);
    }
  }
}

TEST(BinaryCache, WriterRefusesANarThatDoesNotMatchItsMetadata) {
  StoreDir sd;
  TempDir tmp;
  FileCacheStorage out(tmp.path());
  BinaryCacheWriter writer(out, sd, {});
  NarInfo meta;
  meta.path = StorePath("ckrdyfyx6vjdwgz3rncr0zv5h74mn99y-ref-dep2");
  meta.narHash = hashString(HashAlgo::kSha256, "expected");
  meta.narSize = 8;
  EXPECT_THROW(writer.addPath(meta, [](Sink& s) { s.write("actual!!"); }),
               Error);
  EXPECT_FALSE(writer.hasPath(meta.path));
  EXPECT_FALSE(pathExists(tmp.path() + "/nar"));
  for (auto& e : fs::directory_iterator(tmp.path()))
    ADD_FAILURE() << "left behind " << e.path();
}

TEST(BinaryCache, LogsAndCacheInfo) {
  StoreDir sd;
  TempDir tmp;
  FileCacheStorage out(tmp.path());
  CacheWriteOptions wo;
  wo.priority = 30;
  wo.wantMassQuery = true;
  BinaryCacheWriter writer(out, sd, wo);
  writer.init();
  EXPECT_EQ(readFile(tmp.path() + "/nix-cache-info"),
            "StoreDir: /nix/store\nWantMassQuery: 1\nPriority: 30\n");
  auto drv = StorePath("1f9nikx99nf5g4kx0i5iv2wn3fw50zqk-ref-main.drv");
  writer.addLog(drv, "building\n");
  EXPECT_THROW(
      writer.addLog(StorePath("1f9nikx99nf5g4kx0i5iv2wn3fw50zqk-x"), ""),
      Error);
  BinaryCacheReader reader(out, sd);
  auto ci = reader.init();
  EXPECT_EQ(ci.priority, 30);
  EXPECT_TRUE(ci.wantMassQuery);
  EXPECT_EQ(reader.getLog(drv), "building\n");

  // Another store directory: both sides refuse.
  BinaryCacheReader other(out, StoreDir("/other/store"));
  EXPECT_THROW(other.init(), Error);
  BinaryCacheWriter otherWriter(out, StoreDir("/other/store"), {});
  EXPECT_THROW(otherWriter.init(), Error);
  writeFile(tmp.path() + "/nix-cache-info",
            "StoreDir: /nix/store\nPriority: high\n");
  EXPECT_THROW(reader.init(), FormatError);
  writeFile(tmp.path() + "/nix-cache-info", "StoreDir /nix/store\n");
  EXPECT_THROW(reader.init(), FormatError);
  auto lenient =
      CacheInfo::parse("StoreDir: /nix/store\nWantMassQuery: yes\nX: 1\n", "t");
  EXPECT_FALSE(lenient.wantMassQuery);
}

TEST(BinaryCache, StoragePathsAndUris) {
  EXPECT_THROW(checkCacheRelPath("../etc/passwd"), FormatError);
  EXPECT_THROW(checkCacheRelPath("/etc/passwd"), FormatError);
  EXPECT_THROW(checkCacheRelPath("nar//x"), FormatError);
  EXPECT_THROW(checkCacheRelPath("nar/./x"), FormatError);
  EXPECT_THROW(checkCacheRelPath(""), FormatError);
  checkCacheRelPath("nar/abc.nar.xz");
  EXPECT_THROW(openCacheStorage("https://cache.nixos.org"), FormatError);
  EXPECT_THROW(openCacheStorage("file://relative"), FormatError);
  EXPECT_THROW(openCacheStorage("file:///x?compression=xz"), FormatError);
  EXPECT_EQ(openCacheStorage("file:///srv/cache/")->uri(), "file:///srv/cache");
}

// Fuzzing (nar_fuzz) found that a symlink target (or name) that is not
// UTF-8 made narListing throw nlohmann's type_error: now such bytes become
// U+FFFD and the listing is still JSON.
TEST(BinaryCache, ListingsOfNonUtf8NamesAreJson) {
  StringSink nar;
  nar.s = std::string("\x0d\0\0\0\0\0\0\0nix-archive-1\0\0\0", 24);
  auto token = [&](std::string_view t) {
    std::string len(8, '\0');
    len[0] = static_cast<char>(t.size());
    nar.s += len;
    nar.s += t;
    nar.s += std::string((8 - t.size() % 8) % 8, '\0');
  };
  for (auto t : {"(", "type", "symlink", "target"}) token(t);
  token("\xdb./some/target");
  token(")");
  StringSource src(nar.s);
  auto listing = narListing(src);
  EXPECT_EQ(listing,
            "{\"version\":1,\"root\":{\"type\":\"symlink\",\"target\":"
            "\"\xef\xbf\xbd./some/target\"}}");
}

}  // namespace
}  // namespace kiln::store
