// Closure-aware garbage collection of a binary cache (cache_gc.h) on a
// FileCacheStorage: what is kept, in which order narinfos go, the NARs'
// grace period, malformed narinfos, and a cache that is not one.
#include "kiln/store/cache_gc.h"

#include <gtest/gtest.h>

#include "kiln/common/error.h"
#include "kiln/common/file.h"

namespace kiln::store {
namespace {

using namespace std::chrono_literals;

/// A store path whose hash part ends in `c`.
StorePath sp(char c) { return StorePath(std::string(31, '1') + c + "-p"); }

std::string narKey(char c) { return "nar/" + std::string(52, c) + ".nar"; }

class CacheGcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_.put("nix-cache-info", "StoreDir: /nix/store\n");
  }

  /// Publishes a narinfo for sp(c) referring to `refs`, and its NAR.
  void publish(char c, const std::string& refs) {
    std::string refLine;
    for (char r : refs)
      refLine += (refLine.empty() ? "" : " ") + sp(r).baseName();
    cache_.put(
        narInfoFileName(sp(c)),
        "StorePath: /nix/store/" + sp(c).baseName() + "\nURL: " + narKey(c) +
            "\nCompression: none\nNarHash: sha256:" + std::string(52, '0') +
            "\nNarSize: 4\nReferences: " + refLine + "\n");
    cache_.put(narKey(c), "NAR!");
  }

  CacheGcPlan run(const StorePathSet& roots, int64_t now, bool apply = true) {
    auto plan = planCacheGc(readCacheSnapshot(cache_), roots, now, 1h);
    if (apply) applyCacheGc(cache_, plan);
    return plan;
  }

  static std::vector<std::string> keys(const std::vector<CacheGcItem>& v) {
    std::vector<std::string> out;
    for (auto& i : v) out.push_back(i.key);
    return out;
  }

  TempDir dir_{"kiln-cache-gc"};
  FileCacheStorage cache_{dir_.path()};
};

TEST_F(CacheGcTest, KeepsTheRootsClosureAndDeletesReferrersFirst) {
  publish('a', "b");   // root a -> b
  publish('c', "db");  // dead c -> d (dead), c -> b (live)
  publish('d', "");
  publish('b', "b");  // self-reference
  cache_.put(std::string(31, '1') + "c.ls", "{}");
  auto plan = run({sp('a')}, 1000);
  EXPECT_EQ(keys(plan.narinfos),
            (std::vector<std::string>{narInfoFileName(sp('c')),
                                      std::string(31, '1') + "c.ls",
                                      narInfoFileName(sp('d'))}));
  EXPECT_EQ(plan.keptNarinfos, 2u);
  EXPECT_TRUE(cache_.exists(narInfoFileName(sp('b'))));
  EXPECT_FALSE(cache_.exists(narInfoFileName(sp('c'))));
  EXPECT_FALSE(cache_.exists(std::string(31, '1') + "c.ls"));
  // The dead paths' NARs wait out the grace period ...
  EXPECT_TRUE(plan.nars.empty());
  EXPECT_EQ(keys(plan.narsWaiting),
            (std::vector<std::string>{narKey('c'), narKey('d')}));
  EXPECT_TRUE(cache_.exists(narKey('c')));
  // ... counted from the first run that saw them unnamed.
  EXPECT_TRUE(run({sp('a')}, 1000 + 3599).nars.empty());
  auto later = run({sp('a')}, 1000 + 3600);
  EXPECT_EQ(keys(later.nars),
            (std::vector<std::string>{narKey('c'), narKey('d')}));
  EXPECT_FALSE(cache_.exists(narKey('c')));
  EXPECT_TRUE(cache_.exists(narKey('a')));
  EXPECT_TRUE(cache_.exists(narKey('b')));
  EXPECT_EQ(later.keptNars, 2u);
}

TEST_F(CacheGcTest, APlanIsExactlyWhatIsThenDeleted) {
  publish('a', "");
  publish('b', "");
  auto dry = run({sp('a')}, 50, false);
  EXPECT_TRUE(cache_.exists(narInfoFileName(sp('b'))));
  EXPECT_FALSE(cache_.exists(kPendingNarsKey));
  auto real = run({sp('a')}, 50);
  EXPECT_EQ(keys(dry.narinfos), keys(real.narinfos));
  EXPECT_EQ(keys(dry.narsWaiting), keys(real.narsWaiting));
}

TEST_F(CacheGcTest, ANarNamedAgainLeavesThePendingList) {
  publish('a', "");
  run({}, 0);        // a's narinfo goes, its NAR waits
  publish('a', "");  // republished
  auto plan = run({sp('a')}, 7200);
  EXPECT_TRUE(plan.nars.empty());
  EXPECT_TRUE(plan.pendingSince.empty());
  EXPECT_TRUE(cache_.exists(narKey('a')));
}

TEST_F(CacheGcTest, MissingRootsAreReported) {
  publish('a', "");
  auto plan = run({sp('a'), sp('z')}, 0);
  EXPECT_EQ(plan.missingRoots, (StorePathSet{sp('z')}));
  EXPECT_TRUE(plan.narinfos.empty());
}

TEST_F(CacheGcTest, MalformedNarinfosAreKeptWithWhatTheyName) {
  publish('b', "");
  publish('c', "");
  std::string bad = std::string(31, '1') + "x.narinfo";
  cache_.put(bad, "StorePath: nonsense\nURL: " + narKey('x') +
                      "\nReferences: " + sp('b').baseName() + " ../evil\n");
  cache_.put(narKey('x'), "NAR!");
  auto snap = readCacheSnapshot(cache_);
  ASSERT_EQ(snap.malformed.count(bad), 1u);
  auto plan = planCacheGc(snap, {}, 0, 0s);
  applyCacheGc(cache_, plan);
  EXPECT_EQ(keys(plan.narinfos),
            (std::vector<std::string>{narInfoFileName(sp('c'))}));
  EXPECT_TRUE(cache_.exists(bad));
  EXPECT_TRUE(cache_.exists(narKey('x')));
  EXPECT_TRUE(cache_.exists(narInfoFileName(sp('b'))));
  EXPECT_FALSE(cache_.exists(narKey('c')));  // no grace: gone at once
}

TEST_F(CacheGcTest, ANarinfoUnderAnotherFileNameIsMalformed) {
  publish('a', "");
  auto text = cache_.get(narInfoFileName(sp('a')));
  cache_.put(std::string(31, '1') + "q.narinfo", *text);
  auto snap = readCacheSnapshot(cache_);
  EXPECT_EQ(snap.malformed.size(), 1u);
  EXPECT_EQ(snap.narinfos.size(), 1u);
}

TEST_F(CacheGcTest, AGarbledPendingListOnlyDelaysDeletion) {
  publish('a', "");
  cache_.put(kPendingNarsKey, "garbage\n12x " + narKey('a') + "\n");
  auto plan = run({}, 10);
  EXPECT_EQ(plan.narsWaiting.size(), 1u);
  EXPECT_EQ(plan.pendingSince.at(narKey('a')), 10);
}

TEST_F(CacheGcTest, ADirectoryWithoutCacheInfoIsRefused) {
  TempDir other("kiln-not-a-cache");
  FileCacheStorage storage(other.path());
  try {
    readCacheSnapshot(storage);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(storage.uri()), std::string::npos);
  }
}

TEST(CacheStorageListing, HttpCachesCannotBeCollected) {
  HttpCacheStorage http("http://127.0.0.1:9");
  EXPECT_THROW(http.listObjects("", 10), Error);
  EXPECT_THROW(http.remove("x.narinfo"), Error);
}

}  // namespace
}  // namespace kiln::store
