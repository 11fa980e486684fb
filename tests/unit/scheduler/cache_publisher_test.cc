// The publisher of the farm's built outputs (cache_publisher.h) into a
// directory cache: closures first, signed, resumed from its mark after a
// restart; a failing cache leaves the outputs waiting, says why, and gets
// everything once it works again.
#include "kiln/scheduler/cache_publisher.h"

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <atomic>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/cache_copy.h"
#include "kiln/store/local_store.h"
#include "test_support.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;

const store::StorePath kMain("7zzljlcf6mdzr5g1358ry3rlgcm8kbf3-ref-main");

// A directory cache that fails every request while `down` is set.
class FlakyStorage : public store::CacheStorage {
 public:
  FlakyStorage(std::string root, std::atomic<bool>& down)
      : files_(std::move(root)), down_(down) {}
  bool exists(const std::string& rel) override {
    check();
    return files_.exists(rel);
  }
  std::optional<std::string> get(const std::string& rel) override {
    check();
    return files_.get(rel);
  }
  std::unique_ptr<Source> open(const std::string& rel) override {
    check();
    return files_.open(rel);
  }
  std::unique_ptr<store::CacheUpload> upload() override {
    check();
    return files_.upload();
  }
  std::string uri() const override { return "flaky://cache"; }

 private:
  void check() const {
    if (down_) throw Error("the cache is unreachable");
  }
  store::FileCacheStorage files_;
  std::atomic<bool>& down_;
};

class CachePublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The vector cache's closure of ref-main: built paths (with a deriver)
    // and sources.
    store::LocalStore st(state_);
    store::FileCacheStorage vectors(test::vectorPath("cache/cache-none"));
    store::BinaryCacheReader reader(vectors, st.storeDir());
    store::ImportOptions o;
    o.trust.requireSigs = false;
    store::copyClosureFromCache(reader, st, {kMain}, o);
    built_ = st.countBuiltPathsAfter(0);
    closure_ = st.queryRequisites({kMain}).size();
    cfg_.stateDir = state_;
    cfg_.signingKey = store::SecretKey::generate("farm-1");
    cfg_.poll = 10ms;
    cfg_.minBackoff = 10ms;
    cfg_.maxBackoff = 20ms;
  }

  std::unique_ptr<CachePublisher> start() {
    return std::make_unique<CachePublisher>(
        cfg_, std::make_unique<FlakyStorage>(cache_, down_), &registry_);
  }

  TempDir tmp_;
  std::string state_ = tmp_.path() + "/state", cache_ = tmp_.path() + "/cache";
  std::atomic<bool> down_{false};
  prometheus::Registry registry_;
  CachePublisherConfig cfg_;
  uint64_t built_ = 0;
  size_t closure_ = 0;
};

TEST_F(CachePublisherTest, PublishesClosuresSignedAndResumesFromItsMark) {
  ASSERT_GT(built_, 0u);
  {
    auto pub = start();
    ASSERT_TRUE(test::pollUntil(
        [&] {
          auto s = pub->status();
          return s.waiting == 0 && s.publishedPaths == closure_;
        },
        10s));
    EXPECT_TRUE(pub->status().lastError.empty());
  }
  store::FileCacheStorage files(cache_);
  store::BinaryCacheReader reader(files, store::StoreDir());
  store::PublicKeys keys;
  keys.add(cfg_.signingKey->toPublicKey());
  store::LocalStore st(state_);
  for (auto& p : st.queryRequisites({kMain})) {
    auto ni = reader.queryNarInfo(p);
    ASSERT_TRUE(ni) << p.baseName();
    EXPECT_TRUE(files.exists(ni->url));
    EXPECT_TRUE(reader.hasValidSignature(*ni, keys));
    EXPECT_EQ(ni->compression, "zstd");
  }
  EXPECT_TRUE(files.exists("nix-cache-info"));
  EXPECT_EQ(readFile(state_ + "/cache-published").substr(0, 14),
            "flaky://cache\n");
  // Started again: the mark says everything went; nothing is uploaded.
  auto again = start();
  ASSERT_TRUE(
      test::pollUntil([&] { return again->status().waiting == 0; }, 10s));
  EXPECT_EQ(again->status().publishedPaths, 0u);
}

TEST_F(CachePublisherTest, AFailingCacheLeavesOutputsWaitingAndSaysWhy) {
  down_ = true;
  auto pub = start();
  ASSERT_TRUE(
      test::pollUntil([&] { return pub->status().failures >= 3; }, 10s));
  auto s = pub->status();
  EXPECT_EQ(s.waiting, built_);
  EXPECT_EQ(s.publishedPaths, 0u);
  EXPECT_EQ(s.lastError, "the cache is unreachable");
  EXPECT_GT(s.failingSinceMs, 0);
  EXPECT_FALSE(pathExists(cache_ + "/nix-cache-info"));
  down_ = false;
  ASSERT_TRUE(test::pollUntil(
      [&] {
        auto now = pub->status();
        return now.waiting == 0 && now.publishedPaths == closure_ &&
               now.lastError.empty() && now.failingSinceMs == 0;
      },
      10s));
  store::FileCacheStorage files(cache_);
  store::BinaryCacheReader reader(files, store::StoreDir());
  EXPECT_TRUE(reader.queryNarInfo(kMain));
}

}  // namespace
}  // namespace kiln::scheduler
