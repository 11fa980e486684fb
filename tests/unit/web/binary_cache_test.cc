// The binary cache's routes on a real server over loopback: nix-cache-info,
// signed narinfos whose NAR decompresses to the store's NAR, ranges and
// HEAD on NAR files, logs, bad names, one compression for concurrent first
// requests, and pruning after garbage collection.
#include "kiln/web/binary_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <thread>
#include <vector>

#include "http_client.h"
#include "kiln/common/file.h"
#include "kiln/scheduler/logs.h"
#include "kiln/scheduler/state_db.h"
#include "kiln/store/compression.h"
#include "kiln/store/local_store.h"
#include "kiln/store/nar.h"
#include "kiln/store/narinfo.h"
#include "kiln/web/routes.h"
#include "test_support.h"

namespace kiln::web {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class BinaryCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      store::LocalStore st(dir.path());
      dep = st.addText("dep.txt", std::string(100000, 'd'), {});
      top = st.addText("top.txt", "uses " + sd.printPath(dep), {dep});
    }  // the adder's temporary roots end here
    BinaryCacheConfig bc;
    bc.stateDir = dir.path();
    bc.signingKey = key;
    bc.clock = &clock;
    bc.pruneGrace = 60s;
    cache = std::make_shared<BinaryCache>(bc);
    WebContext ctx;
    ctx.stateDir = dir.path();
    ctx.binaryCache = cache;
    WebServerConfig cfg;
    cfg.listen = "127.0.0.1:0";
    web = std::make_unique<WebFrontend>(cfg, std::move(ctx));
  }
  test::HttpAnswer get(const std::string& path, const std::string& hdrs = "") {
    auto a = test::webGet(web->port(), path, hdrs);
    EXPECT_TRUE(a) << path;
    return a ? *a : test::HttpAnswer{};
  }
  std::string narInfoPath(const store::StorePath& p) {
    return "/" + std::string(p.hashPart()) + ".narinfo";
  }
  store::NarInfo narInfo(const store::StorePath& p) {
    auto a = get(narInfoPath(p));
    EXPECT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(a.header("content-type"), "text/x-nix-narinfo");
    return store::NarInfo::parse(sd, a.body, "served");
  }
  std::string narOf(const store::StorePath& p) {
    store::LocalStore st(dir.path());
    StringSink s;
    store::dumpPath(st.physicalPath(p), s);
    return s.s;
  }

  TempDir dir{"kiln-bincache"};
  store::StoreDir sd;
  store::StorePath dep{"00000000000000000000000000000000-x"};
  store::StorePath top = dep;
  store::SecretKey key = store::SecretKey::generate("test-farm-1");
  FakeClock clock{RealClock::instance().wallNow()};
  std::shared_ptr<BinaryCache> cache;
  std::unique_ptr<WebFrontend> web;
};

TEST_F(BinaryCacheTest, ServesSignedNarInfosAndTheirNars) {
  auto info = get("/nix-cache-info");
  EXPECT_EQ(info.status, 200);
  EXPECT_EQ(info.body,
            "StoreDir: /nix/store\nWantMassQuery: 1\nPriority: 30\n");
  auto ni = narInfo(top);
  EXPECT_EQ(ni.path, top);
  EXPECT_EQ(ni.compression, "zstd");
  EXPECT_EQ(ni.references, store::StorePathSet{dep});
  ASSERT_EQ(ni.sigs.size(), 1u);
  store::PublicKeys keys;
  keys.add(key.toPublicKey());
  EXPECT_TRUE(keys.verify(store::pathFingerprint(sd, ni.path, ni.narHash,
                                                 ni.narSize, ni.references),
                          *ni.sigs.begin()));
  EXPECT_THAT(ni.url, ::testing::StartsWith("nar/"));
  auto file = get("/" + ni.url);
  ASSERT_EQ(file.status, 200);
  EXPECT_EQ(file.header("content-type"), "application/x-nix-nar");
  EXPECT_EQ(file.body.size(), *ni.fileSize);
  EXPECT_EQ(hashString(HashAlgo::kSha256, file.body), *ni.fileHash);
  StringSource compressed(file.body);
  auto nar = store::makeDecompressionSource("zstd", compressed);
  StringSink unpacked;
  char buf[65536];
  while (size_t n = nar->read(buf, sizeof buf)) unpacked.write({buf, n});
  EXPECT_EQ(unpacked.s, narOf(top));
  EXPECT_EQ(hashString(HashAlgo::kSha256, unpacked.s), ni.narHash);
}

TEST_F(BinaryCacheTest, NarFilesAnswerRangesAndHead) {
  auto ni = narInfo(dep);
  auto whole = get("/" + ni.url).body;
  auto part = get("/" + ni.url, "Range: bytes=4-13\r\n");
  EXPECT_EQ(part.status, 206);
  EXPECT_EQ(part.body, whole.substr(4, 10));
  auto head = test::exchange(web->port(),
                             "HEAD /" + ni.url +
                                 " HTTP/1.1\r\nHost: localhost\r\nConnection: "
                                 "close\r\n\r\n",
                             true);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->header("content-length"), std::to_string(*ni.fileSize));
  EXPECT_TRUE(head->body.empty());
  auto headInfo = test::exchange(web->port(),
                                 "HEAD " + narInfoPath(dep) +
                                     " HTTP/1.1\r\nHost: localhost\r\nConnection: "
                                     "close\r\n\r\n",
                                 true);
  ASSERT_TRUE(headInfo);
  EXPECT_EQ(headInfo->status, 200);
}

TEST_F(BinaryCacheTest, UnknownPathsAndMalformedNamesAreRefused) {
  auto unknown = get("/00000000000000000000000000000000.narinfo");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_THAT(unknown.body, HasSubstr("no valid store path has hash part"));
  EXPECT_EQ(get("/abc.narinfo").status, 400);
  EXPECT_THAT(get("/eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee.narinfo").body,
              HasSubstr("not a store path hash part"));
  std::string h52(52, '0');
  EXPECT_EQ(get("/nar/" + h52 + ".nar.zst").status, 404);  // not kept
  for (const std::string& bad : std::vector<std::string>{
           "/nar/" + h52 + ".nar.xz", "/nar/" + h52 + ".nar", "/nar/x.nar.zst",
           "/nar/..%2F..%2F..%2Fetc%2Fpasswd", "/nar/../../etc/passwd",
           "/nar/sub/" + h52 + ".nar.zst", "/log/..%2Fscheduler.sqlite",
           "/log/../scheduler.sqlite", "/log/" + dep.baseName()}) {
    auto a = get(bad);
    EXPECT_EQ(a.status, 400) << bad << ": " << a.body;
    EXPECT_THAT(a.body, ::testing::AnyOf(HasSubstr("malformed"),
                                         HasSubstr("single file name"),
                                         HasSubstr("not a derivation")))
        << bad;
  }
  std::string drv = "11111111111111111111111111111111-hello.drv";
  EXPECT_EQ(get("/log/" + drv).status, 404);
  auto logFile = scheduler::stepLogPath(dir.path(), drv, 1);
  createDirs(dirNameOf(logFile));
  writeFile(logFile, "building hello\n");
  writeFile(scheduler::stepLogPath(dir.path(), drv, 2), "attempt two\n");
  // The step's attempts in the state database say which files are its.
  EXPECT_EQ(get("/log/" + drv).status, 404);
  {
    scheduler::StateDb db(dir.path() + "/scheduler.sqlite");
    scheduler::StepRow step;
    step.drvPath = "/nix/store/" + drv;
    int64_t id = db.upsertStep(step);
    db.startStep(id, "w", 1);
    db.startStep(id, "w", 2);
  }
  auto log = get("/log/" + drv);
  EXPECT_EQ(log.status, 200);
  EXPECT_EQ(log.body, "attempt two\n");
}

TEST_F(BinaryCacheTest, ConcurrentFirstRequestsCompressOnce) {
  std::vector<std::string> bodies(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < bodies.size(); i++)
    threads.emplace_back([&, i] {
      auto a = test::webGet(web->port(), narInfoPath(dep));
      if (a) bodies[i] = a->body;
    });
  for (auto& t : threads) t.join();
  for (auto& b : bodies) EXPECT_EQ(b, bodies[0]);
  EXPECT_THAT(bodies[0], HasSubstr("StorePath: " + sd.printPath(dep)));
  EXPECT_EQ(cache->compressions(), 1u);
  narInfo(dep);
  EXPECT_EQ(cache->compressions(), 1u);
}

TEST_F(BinaryCacheTest, CollectedPathsVanishAndTheirNarsArePrunedLater) {
  auto ni = narInfo(top);
  auto kept = cache->config().cacheDir + "/" + ni.url;
  ASSERT_TRUE(pathExists(kept));
  std::string upload = cache->config().cacheDir + "/.kiln-upload-1-0";
  writeFile(upload, "half");
  // Its age is judged by the cache's (fake) clock: written "now", whatever
  // real time the set-up took (a slow build once took over a second).
  int64_t nowMs = clock.nowMs();
  struct timespec times[2] = {{nowMs / 1000, (nowMs % 1000) * 1000000},
                              {nowMs / 1000, (nowMs % 1000) * 1000000}};
  ASSERT_EQ(::utimensat(AT_FDCWD, upload.c_str(), times, 0), 0);
  {
    store::LocalStore st(dir.path());
    auto gc = st.collectGarbage();
    EXPECT_EQ(gc.deleted.size(), 2u);
  }
  EXPECT_EQ(get(narInfoPath(top)).status, 404);
  auto r = cache->prune();
  EXPECT_EQ(r.narInfos, 1u);
  EXPECT_EQ(r.nars, 0u);  // within the grace period: still served
  EXPECT_EQ(get("/" + ni.url).status, 200);
  clock.advance(61s);
  r = cache->prune();
  EXPECT_EQ(r.nars, 1u);
  EXPECT_EQ(r.temporaries, 1u);
  EXPECT_FALSE(pathExists(kept));
  EXPECT_EQ(get("/" + ni.url).status, 404);
}

// The pruning thread waits on the cache's clock: parked while the clock
// stands still (no spinning, fake time unmoved), it prunes once the test
// moves the clock by its interval.
TEST_F(BinaryCacheTest, ThePruningThreadWaitsOnTheCachesClock) {
  BinaryCacheConfig bc = cache->config();
  bc.pruneInterval = 600s;
  auto t0 = clock.now();
  auto pruning = std::make_shared<BinaryCache>(bc);
  createDirs(bc.cacheDir);  // made at the first NAR served otherwise
  std::string upload = bc.cacheDir + "/.kiln-upload-2-0";
  writeFile(upload, "half");
  int64_t nowMs = clock.nowMs();
  struct timespec times[2] = {{nowMs / 1000, (nowMs % 1000) * 1000000},
                              {nowMs / 1000, (nowMs % 1000) * 1000000}};
  ASSERT_EQ(::utimensat(AT_FDCWD, upload.c_str(), times, 0), 0);
  ASSERT_TRUE(test::pollUntil([&] { return clock.blockedWaits() == 1; }, 10s));
  EXPECT_EQ(clock.now(), t0);
  EXPECT_TRUE(pathExists(upload));
  clock.advance(600s);  // past the grace too: the temporary goes
  EXPECT_TRUE(test::pollUntil([&] { return !pathExists(upload); }, 10s));
  pruning.reset();  // stops and joins the thread
  EXPECT_EQ(clock.now() - t0, 600s);
}

}  // namespace
}  // namespace kiln::web
