// A farm whose binary cache is a bucket of the real S3 gateway (issue 32,
// stage 1: `kiln scheduler --cache s3://…`): every output the farm builds
// is published there, compressed and signed, closure first; the real `nix`
// substitutes it from the public-read bucket over plain HTTP; the web
// serves the same narinfo. With the gateway down, builds still finish,
// the outputs wait and the farm says why (metrics, `kiln queue`, log); a
// scheduler restart loses nothing, and once the gateway is back everything
// is published. Wrong credentials are named with bucket and endpoint.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln/store/binary_cache.h"
#include "kiln/store/signature.h"
#include "kiln_process.h"
#include "object_store.h"
#include "postgres_server.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Two jobs: `lib`, and `app` whose output refers to lib's (its closure).
const char* kCollection = R"({
  lib = mk "lib" "mkdir $out; echo library > $out/lib.txt" [];
  app = mk "app" "mkdir $out; echo $deps > $out/uses; echo app > $out/app.txt"
    [ (mk "lib" "mkdir $out; echo library > $out/lib.txt" []) ];
})";

class FarmCache : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_UNLESS_FARM_CAN_RUN();
    std::string why;
    if (!test::ObjectStoreServer::canRun(&why)) GTEST_SKIP() << why;
    kit_ = std::make_unique<test::S3FarmKit>(dir_.path());
    s3_ = kit_->s3.get();
    webPort_ = test::freeLoopbackPort();
    test::FarmOptions o;
    o.schedulerArgs = s3_->farmCacheArgs("farm", kit_->secretKeyFile);
    o.schedulerArgs.insert(o.schedulerArgs.end(),
                           {"--web-listen",
                            "127.0.0.1:" + std::to_string(webPort_)});
    o.schedulerEnv = s3_->credentials();
    farm_ = std::make_unique<test::Farm>(o);
  }

  // Builds the collection; returns the outputs' full paths.
  std::vector<std::string> buildAll() {
    auto coll = farm_->writeCollection("coll", kCollection);
    farm_->addWorker();
    EXPECT_TRUE(farm_->waitForWorkers(1, 60s));
    farm_->createJobset("p", "j", coll);
    int64_t eval = farm_->evaluate("p", "j");
    EXPECT_TRUE(farm_->waitForBuilds(eval, 300s));
    for (auto& b : farm_->builds(eval)) EXPECT_EQ(b.status, 0) << b.job;
    std::vector<std::string> paths;
    for (auto& o : farm_->view()->outputs(eval)) paths.push_back(o.path);
    EXPECT_EQ(paths.size(), 2u);
    return paths;
  }

  // Whether the bucket has a narinfo and its NAR for every path of
  // `paths`, each narinfo signed by the farm's key.
  bool published(const std::vector<std::string>& paths) {
    for (auto& p : paths) {
      auto ni = kit_->signedNarInfo("farm", p);
      if (!ni) return false;
      EXPECT_EQ(ni->compression, "zstd") << p;
    }
    return true;
  }

  std::optional<double> metric(const std::string& name) {
    return farm_->metric(name);
  }

  TempDir dir_{"kiln-farm-cache"};
  std::unique_ptr<test::S3FarmKit> kit_;
  test::ObjectStoreServer* s3_ = nullptr;  ///< kit_'s
  std::unique_ptr<test::Farm> farm_;
  int webPort_ = 0;
};

TEST_F(FarmCache, PublishesWhatItBuildsAndNixSubstitutesIt) {
  s3_->start();
  s3_->createBucket("farm", true);
  farm_->startScheduler();
  auto paths = buildAll();
  ASSERT_TRUE(test::pollUntil([&] { return published(paths); }, 60s))
      << farm_->scheduler().log();
  ASSERT_TRUE(test::pollUntil(
      [&] { return metric("kiln_cache_outputs_waiting") == 0.0; }, 30s));
  EXPECT_EQ(metric("kiln_cache_publish_failing"), 0.0);
  EXPECT_GE(metric("kiln_cache_published_paths_total").value_or(0), 2.0);

  // The web front end serves the bucket's narinfo as it is (signed).
  store::S3CacheStorage s3(s3_->uri("farm"));
  for (auto& p : paths) {
    std::string hash = baseNameOf(p).substr(0, 32);
    EXPECT_EQ(test::httpGet(webPort_, "/" + hash + ".narinfo"),
              s3.get(hash + ".narinfo").value_or("missing"));
    auto ni = store::NarInfo::parse(store::StoreDir(),
                                    *s3.get(hash + ".narinfo"), hash);
    EXPECT_EQ(test::httpGet(webPort_, "/" + ni.url), *s3.get(ni.url));
  }
  EXPECT_THAT(test::httpGet(webPort_, "/nix-cache-info"),
              HasSubstr("StoreDir: /nix/store"));
  try {
    test::httpGet(webPort_, "/" + std::string(32, '0') + ".narinfo");
    ADD_FAILURE() << "a narinfo the bucket lacks was served";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("404"));
  }

  // `kiln web` on another host: no state directory, the cache read from
  // the bucket (its pages need a PostgreSQL farm; an empty one will do).
  if (test::PostgresServer::available()) {
    test::PostgresServer pg;
    std::string db = pg.createDatabase("web");
    auto migrated =
        test::run({test::kilnBinary(), "db", "migrate", "--database", db}, "",
                  {"PGPASSFILE=" + pg.passFile()});
    ASSERT_EQ(migrated.exitCode, 0) << migrated.err;
    test::KilnProcess web({"web", "--database", db, "--listen", "127.0.0.1:0",
                           "--cache", s3_->uri("farm")},
                          dir_.path() + "/web.log",
                          {{"PGPASSFILE", pg.passFile()},
                           {"AWS_ACCESS_KEY_ID", s3_->accessKey()},
                           {"AWS_SECRET_ACCESS_KEY", s3_->secretKey()}});
    ASSERT_TRUE(web.waitForLog("web http://", 30s)) << web.log();
    std::string log = web.log();
    int port = std::stoi(log.substr(log.find("web http://127.0.0.1:") + 21));
    for (auto& p : paths) {
      std::string name = baseNameOf(p).substr(0, 32) + ".narinfo";
      EXPECT_EQ(test::httpGet(port, "/" + name), *s3.get(name));
    }
  }

  // The real nix substitutes app's closure from the public-read bucket.
  if (!test::haveProgram("nix")) GTEST_SKIP() << "nix is not installed";
  std::string app = paths[0].ends_with("-app") ? paths[0] : paths[1];
  std::string root = dir_.path() + "/nixroot";
  auto copied = s3_->nixCopy("farm", readFile(kit_->publicKeyFile), root,
                             app, dir_.path() + "/xdg");
  ASSERT_EQ(copied.exitCode, 0) << copied.err;
  EXPECT_EQ(readFile(root + app + "/app.txt"), "app\n");
  std::string lib = paths[0].ends_with("-app") ? paths[1] : paths[0];
  EXPECT_EQ(readFile(root + lib + "/lib.txt"), "library\n");
}

TEST_F(FarmCache, OutputsWaitForTheCacheAndNothingIsLost) {
  // The gateway is down while the outputs are due: builds finish anyway.
  farm_->startScheduler();
  auto paths = buildAll();
  ASSERT_TRUE(test::pollUntil(
      [&] {
        return metric("kiln_cache_publish_failing") == 1.0 &&
               metric("kiln_cache_outputs_waiting") == 2.0;
      },
      60s))
      << farm_->metricsText();
  EXPECT_THAT(
      farm_->scheduler().log(),
      HasSubstr("binary cache " + s3_->uri("farm") + ": publishing waits ("));
  auto queue = farm_->kiln({"queue"});
  EXPECT_THAT(queue.out, HasSubstr("2 built outputs wait to be published to " +
                                   s3_->uri("farm")));

  // What waits is in the store, not in the scheduler's memory.
  farm_->killScheduler();
  s3_->start();
  s3_->createBucket("farm", true);
  // Wrong credentials: refused, naming the bucket and the endpoint.
  farm_->setSchedulerEnv("AWS_SECRET_ACCESS_KEY", "not-the-secret");
  farm_->startScheduler();
  ASSERT_TRUE(test::pollUntil(
      [&] {
        return farm_->scheduler().log().find("access denied (403)") !=
               std::string::npos;
      },
      60s))
      << farm_->scheduler().log();
  EXPECT_THAT(farm_->scheduler().log(),
              HasSubstr("the bucket 'farm' at " + s3_->endpoint()));
  EXPECT_FALSE(published(paths));
  farm_->killScheduler();

  farm_->setSchedulerEnv("AWS_SECRET_ACCESS_KEY", s3_->secretKey());
  farm_->startScheduler();
  ASSERT_TRUE(test::pollUntil([&] { return published(paths); }, 60s))
      << farm_->scheduler().log();
  ASSERT_TRUE(test::pollUntil(
      [&] {
        return metric("kiln_cache_outputs_waiting") == 0.0 &&
               metric("kiln_cache_publish_failing") == 0.0;
      },
      30s));
  EXPECT_THAT(farm_->kiln({"queue"}).out,
              ::testing::Not(HasSubstr("wait to be published")));
}

}  // namespace
}  // namespace kiln
