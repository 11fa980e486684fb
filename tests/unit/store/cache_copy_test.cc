// Closures between a LocalStore and binary caches: the vector caches
// import; corrupt or untrusted closures leave the store unchanged.
#include "kiln/store/cache_copy.h"

#include <gtest/gtest.h>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "test_support.h"
#include "vector_cache_copy.h"

namespace kiln::store {
namespace {

const StorePath kMain("7zzljlcf6mdzr5g1358ry3rlgcm8kbf3-ref-main");
const StorePath kDep1("r4zq3683nfggrd8h6qiyddxw5v63hc3v-ref-dep1");
const StorePath kDep2("ckrdyfyx6vjdwgz3rncr0zv5h74mn99y-ref-dep2");
const StorePathSet kCaPaths = {
    StorePath("xfp2hphvk98rkk9ywlqpp587rjdcgnc2-hello.txt"),
    StorePath("iixxin28s82lrxs8v4lcf7nha2dkwprm-hello.txt"),
    StorePath("9p0nl625gm5mli8h2xfsgma0zz31g9yc-t.txt")};

ImportOptions vectorTrust() {
  ImportOptions o;
  o.trust.keys.add(readPublicKeyFile(test::vectorPath("cache/public.key")));
  return o;
}

CopyResult importFrom(const std::string& root, LocalStore& store,
                      const StorePathSet& paths,
                      const ImportOptions& o = vectorTrust()) {
  FileCacheStorage storage(root);
  BinaryCacheReader reader(storage, store.storeDir());
  return copyClosureFromCache(reader, store, paths, o);
}

TEST(CacheCopy, ImportsTheVectorCaches) {
  for (auto cache : {"cache-none", "cache-xz"}) {
    SCOPED_TRACE(cache);
    TempDir tmp;
    LocalStore store(tmp.path() + "/state");
    auto root = test::vectorPath(std::string("cache/") + cache);
    auto r = importFrom(root, store, {kMain});
    ASSERT_EQ(r.copied.size(), 5u);
    EXPECT_EQ(r.copied.back(), kMain);  // references first
    FileCacheStorage storage(root);
    BinaryCacheReader reader(storage, store.storeDir());
    for (auto& p : r.copied) {
      auto info = store.requirePathInfo(p);
      auto ni = *reader.queryNarInfo(p);
      EXPECT_EQ(info.narHash, ni.narHash);
      EXPECT_EQ(info.narSize, ni.narSize);
      EXPECT_EQ(info.references, ni.references);
      EXPECT_EQ(info.deriver, ni.deriver);
      EXPECT_EQ(info.sigs, ni.sigs);
      EXPECT_EQ(info.ca, ni.ca);
    }
    EXPECT_EQ(store.queryRequisites({kMain}).size(), 5u);
    EXPECT_TRUE(store.verify().problems.empty());
    auto again = importFrom(root, store, {kMain});
    EXPECT_TRUE(again.copied.empty());
    EXPECT_EQ(again.alreadyPresent, 1u);
  }
  // The content-addressed paths import without any trusted key.
  TempDir tmp;
  LocalStore store(tmp.path() + "/state");
  auto r = importFrom(test::vectorPath("cache/cache-none"), store, kCaPaths,
                      ImportOptions{});
  EXPECT_EQ(r.copied.size(), 3u);
  EXPECT_EQ(readFile(store.physicalPath(*kCaPaths.begin())), "hello");
}

// Store → cache → another store, in every compression, signed by kiln.
TEST(CacheCopy, RoundTripThroughKilnsOwnCache) {
  TempDir tmp;
  LocalStore a(tmp.path() + "/a");
  importFrom(test::vectorPath("cache/cache-none"), a, {kMain});
  auto key = SecretKey::generate("kiln-unit-1");
  for (std::string comp : {"none", "xz", "zstd"}) {
    FileCacheStorage out(tmp.path() + "/cache-" + comp);
    CacheWriteOptions wo;
    wo.compression = comp;
    wo.signingKey = &key;
    BinaryCacheWriter writer(out, a.storeDir(), wo);
    auto w = copyClosureToCache(a, writer, {kMain});
    EXPECT_EQ(w.copied.size(), 5u);
    EXPECT_EQ(w.copied.back(), kMain);
    EXPECT_EQ(copyClosureToCache(a, writer, {kMain}).alreadyPresent, 5u);
    LocalStore b(tmp.path() + "/b-" + comp);
    ImportOptions o;
    o.trust.keys.add(key.toPublicKey());
    EXPECT_EQ(importFrom(out.root(), b, {kMain}, o).copied.size(), 5u);
    auto info = b.requirePathInfo(kMain);
    EXPECT_EQ(info.sigs.size(), 2u);  // Nix's and kiln's
    EXPECT_TRUE(b.verify().problems.empty());
  }
  TempDir other;
  LocalStore c(other.path() + "/c");
  FileCacheStorage empty(other.path() + "/cache");
  BinaryCacheWriter writer(empty, c.storeDir(), CacheWriteOptions{});
  EXPECT_THROW(copyClosureToCache(c, writer, {kMain}), InvalidPathError);
}

/// Imports ref-main's closure from `c` and expects `E` with `what`, and an
/// unchanged (empty) store.
template <typename E>
void expectRefused(CacheCopy& c, const std::string& what,
                   const ImportOptions& o = vectorTrust()) {
  TempDir tmp;
  LocalStore store(tmp.path() + "/state");
  try {
    importFrom(c.root(), store, {kMain}, o);
    ADD_FAILURE() << "import succeeded";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
  EXPECT_TRUE(store.queryAllValidPaths().empty());
}

TEST(CacheCopy, CorruptOrUntrustedClosuresLeaveTheStoreUnchanged) {
  {
    CacheCopy c("cache-xz");  // a leaf's NAR truncated
    auto nar = c.root() + "/" + c.field(kDep1, "URL");
    auto data = readFile(nar);
    writeFile(nar, data.substr(0, data.size() - 30));
    expectRefused<FormatError>(c, "truncated");
  }
  {
    CacheCopy c("cache-xz");  // the top path's NAR corrupt
    auto nar = c.root() + "/" + c.field(kMain, "URL");
    auto data = readFile(nar);
    data[40] ^= 1;
    writeFile(nar, data);
    expectRefused<FormatError>(c, "ref-main");
  }
  {
    CacheCopy c("cache-none");  // a NAR that does not match NarHash
    writeFile(c.root() + "/" + c.field(kDep2, "URL"), std::string(120, 'x'));
    expectRefused<FormatError>(c, "ref-dep2");
  }
  {
    CacheCopy c("cache-none");  // a corrupt narinfo
    c.setField(kDep2, "NarSize", "twelve");
    expectRefused<FormatError>(c, "is corrupt");
  }
  {
    CacheCopy c("cache-none");  // a missing narinfo
    std::filesystem::remove(c.file(kDep2));
    expectRefused<CachePathNotFound>(c, "does not have");
  }
  {
    CacheCopy c("cache-none");  // no trusted key
    expectRefused<Error>(c, "lacks a valid signature", ImportOptions{});
  }
}

// The import is one batch: a bad NAR anywhere leaves nothing of it.
TEST(CacheCopy, ABadNarLeavesNothingOfTheClosure) {
  CacheCopy c("cache-xz");
  auto nar = c.root() + "/" + c.field(kMain, "URL");
  auto data = readFile(nar);
  writeFile(nar, data.substr(0, data.size() - 10));
  TempDir tmp;
  LocalStore store(tmp.path() + "/state");
  EXPECT_THROW(importFrom(c.root(), store, {kMain}), FormatError);
  EXPECT_TRUE(store.queryAllValidPaths().empty());
  EXPECT_TRUE(store.verify().problems.empty());
}

const StorePath kFlat("iixxin28s82lrxs8v4lcf7nha2dkwprm-hello.txt");
const StorePath kText("9p0nl625gm5mli8h2xfsgma0zz31g9yc-t.txt");

ImportOptions noTrust() {
  ImportOptions o;
  o.trust.requireSigs = true;  // and no keys: only CA paths qualify
  return o;
}

// Right path, wrong content: dep2's NAR served for the (unsigned) flat and
// text paths with matching NarHash, so only the CA content check fails.
TEST(CacheCopy, UnsignedCaContentIsCheckedWhenRegistered) {
  for (auto& p : {kFlat, kText}) {
    CacheCopy c("cache-none");
    c.removeField(p, "Sig");
    for (auto key : {"URL", "FileHash", "FileSize", "NarHash", "NarSize"})
      c.setField(p, key, c.field(kDep2, key));
    TempDir tmp;
    LocalStore store(tmp.path() + "/state");
    try {
      importFrom(c.root(), store, {p}, noTrust());
      ADD_FAILURE() << p.baseName() << " was imported";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("does not match its CA field"),
                std::string::npos)
          << e.what();
    }
    EXPECT_TRUE(store.queryAllValidPaths().empty());
  }
}

// A cache whose NAR file changes after it was first opened: the good flat
// file (padded so a parser stops before the end) then another NAR, which
// is what NarHash describes. The import reads each NAR once, so what it
// checks is what it would register: refused, nothing registered.
class FlippingStorage : public FileCacheStorage {
 public:
  FlippingStorage(std::string root, std::string url, std::string first)
      : FileCacheStorage(std::move(root)), url_(std::move(url)),
        first_(std::move(first)) {}
  std::unique_ptr<Source> open(const std::string& rel) override {
    if (rel != url_) return FileCacheStorage::open(rel);
    if (opens_++ == 0) {
      auto s = std::make_shared<std::string>(first_);
      struct Owned : StringSource {
        std::shared_ptr<std::string> keep;
        explicit Owned(std::shared_ptr<std::string> k)
            : StringSource(*k), keep(std::move(k)) {}
      };
      return std::make_unique<Owned>(s);
    }
    return FileCacheStorage::open(rel);
  }
  int opens_ = 0;

 private:
  std::string url_;
  std::string first_;
};

TEST(CacheCopy, ANarIsReadOnceSoAChangedFileCannotSlipIn) {
  CacheCopy c("cache-none");
  c.removeField(kFlat, "Sig");
  std::string goodNar = readFile(c.root() + "/" + c.field(kFlat, "URL"));
  // NarHash/NarSize (and the file) now describe dep2's NAR.
  for (auto key : {"URL", "FileHash", "FileSize", "NarHash", "NarSize"})
    c.setField(kFlat, key, c.field(kDep2, key));
  auto evilSize = std::stoull(c.field(kFlat, "NarSize"));
  ASSERT_GE(evilSize, goodNar.size());
  std::string padded = goodNar + std::string(evilSize - goodNar.size(), '\0');
  TempDir tmp;
  LocalStore store(tmp.path() + "/state");
  FlippingStorage storage(c.root(), c.field(kFlat, "URL"), padded);
  BinaryCacheReader reader(storage, store.storeDir());
  EXPECT_THROW(copyClosureFromCache(reader, store, {kFlat}, noTrust()),
               FormatError);
  EXPECT_EQ(storage.opens_, 1);
  EXPECT_FALSE(store.isValid(kFlat));
}

}  // namespace
}  // namespace kiln::store
