// `kiln cache gc` against the real S3 gateway (issue 32, "Closure-aware
// garbage collection"), on SQLite and PostgreSQL: a farm publishes the closures
// of two evaluations to a bucket; a path of the first is pinned. With
// --keep-evaluations 1, the dry run lists exactly what the real run then
// deletes: the first evaluation's unique paths (narinfos, then their NARs); the
// shared and pinned closures stay, and the real `nix copy --from` still
// substitutes the kept closure. An unreachable cache is an error naming it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln/store/binary_cache.h"
#include "kiln_process.h"
#include "object_store.h"
#include "postgres_server.h"
#include "test_support.h"

namespace kiln {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// `lib` is in both evaluations; `old` (and its dependency) only in the
// first; `kept` (and its dependency) only in the first, but pinned.
const char* kLib =
    R"(lib = mk "lib" "mkdir $out; echo library > $out/lib.txt" [];)";
const char* kFirst = R"(
  old = mk "old" "mkdir $out; echo $deps > $out/uses"
    [ (mk "olddep" "mkdir $out; echo od > $out/f" []) ];
  kept = mk "kept" "mkdir $out; echo $deps > $out/uses; echo k > $out/k.txt"
    [ (mk "keptdep" "mkdir $out; echo kd > $out/f" []) ];
)";
const char* kSecond = R"(
  new = mk "new" "mkdir $out; echo $deps > $out/uses"
    [ (mk "lib" "mkdir $out; echo library > $out/lib.txt" []) ];
)";

// The parameter: whether the farm's state is in PostgreSQL (else SQLite).
class CacheGc : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    KILN_SKIP_UNLESS_FARM_CAN_RUN();
    if (GetParam()) {
      KILN_SKIP_UNLESS_POSTGRES();
      pg_ = std::make_unique<test::PostgresServer>();
      ::setenv("PGPASSFILE", pg_->passFile().c_str(), 1);
    }
    std::string why;
    if (!test::ObjectStoreServer::canRun(&why)) GTEST_SKIP() << why;
    kit_ = std::make_unique<test::S3FarmKit>(dir_.path());
    s3_ = kit_->s3.get();
    test::FarmOptions o;
    o.schedulerArgs = s3_->farmCacheArgs("farm", kit_->secretKeyFile);
    o.schedulerEnv = s3_->credentials();
    if (pg_) o.database = pg_->createDatabase("farm");
    farm_ = std::make_unique<test::Farm>(o);
  }

  // Evaluates and builds `body`; returns job → output path.
  std::map<std::string, std::string> evaluate(const std::string& body) {
    auto coll =
        farm_->writeCollection("coll", "{ " + std::string(kLib) + body + " }");
    if (!jobset_) farm_->createJobset("p", "j", coll);
    jobset_ = true;
    int64_t eval = farm_->evaluate("p", "j");
    EXPECT_TRUE(farm_->waitForBuilds(eval, 300s));
    std::map<std::string, std::string> out;
    for (auto& o : farm_->view()->outputs(eval)) out[o.job] = o.path;
    return out;
  }

  std::string narinfo(const std::string& path) {
    return baseNameOf(path).substr(0, 32) + ".narinfo";
  }

  // The bucket's narinfos and NARs.
  std::set<std::string> objects() {
    store::S3CacheStorage s3(s3_->uri("farm"));
    std::set<std::string> out;
    for (auto& key : s3.list(""))
      if (key.ends_with(".narinfo") || key.starts_with("nar/")) out.insert(key);
    return out;
  }

  std::set<std::string> keys(const json& items) {
    std::set<std::string> out;
    for (auto& i : items) out.insert(i.at("key").get<std::string>());
    return out;
  }

  TempDir dir_{"kiln-cache-gc"};
  std::unique_ptr<test::PostgresServer> pg_;
  std::unique_ptr<test::S3FarmKit> kit_;  ///< the key nix trusts below
  test::ObjectStoreServer* s3_ = nullptr;  ///< kit_'s
  std::unique_ptr<test::Farm> farm_;
  bool jobset_ = false;
};

INSTANTIATE_TEST_SUITE_P(State, CacheGc, ::testing::Bool(), [](auto& info) {
  return info.param ? "Postgres" : "Sqlite";
});

TEST_P(CacheGc, KeepsTheLatestEvaluationAndPinnedClosures) {
  s3_->start();
  s3_->createBucket("farm", true);
  farm_->startScheduler();
  farm_->addWorker();
  ASSERT_TRUE(farm_->waitForWorkers(1, 60s));
  auto first = evaluate(kFirst);
  auto second = evaluate(kSecond);
  ASSERT_EQ(first.size(), 3u);
  ASSERT_EQ(second.size(), 2u);
  // Everything (7 paths: lib, old, olddep, kept, keptdep, new) published.
  ASSERT_TRUE(test::pollUntil(
      [&] {
        auto o = objects();
        return std::count_if(o.begin(), o.end(), [](auto& k) {
                 return k.ends_with(".narinfo");
               }) == 6;
      },
      60s))
      << farm_->scheduler().log();
  auto before = objects();

  auto pin = farm_->kiln({"cache", "pin", "add", "release", first["kept"]});
  ASSERT_EQ(pin.exitCode, 0) << pin.err;
  EXPECT_THAT(farm_->kiln({"cache", "pin", "list"}).out,
              HasSubstr("release\t" + first["kept"]));

  std::vector<std::string> gc = {
      "cache", "gc",      "--cache", s3_->uri("farm"), "--keep-evaluations",
      "1",     "--grace", "0s"};
  auto dryArgs = gc;
  dryArgs.push_back("--dry-run");
  json dry = farm_->kilnJson(dryArgs);
  EXPECT_EQ(objects(), before);  // the dry run changed nothing
  EXPECT_TRUE(dry.at("dryRun").get<bool>());
  EXPECT_EQ(dry.at("narinfos").size(), 2u) << dry.dump(2);
  EXPECT_EQ(dry.at("nars").size(), 2u) << dry.dump(2);
  EXPECT_TRUE(keys(dry.at("narinfos")).count(narinfo(first["old"])));
  EXPECT_TRUE(dry.at("missingRoots").empty());
  for (auto& i : dry.at("nars")) EXPECT_GT(i.at("size").get<uint64_t>(), 0u);

  json real = farm_->kilnJson(gc);
  EXPECT_EQ(keys(real.at("narinfos")), keys(dry.at("narinfos")));
  EXPECT_EQ(keys(real.at("nars")), keys(dry.at("nars")));
  auto after = objects();
  for (auto& k : keys(dry.at("narinfos"))) EXPECT_FALSE(after.count(k)) << k;
  for (auto& k : keys(dry.at("nars"))) EXPECT_FALSE(after.count(k)) << k;
  for (auto& p : {first["lib"], first["kept"], second["new"]})
    EXPECT_TRUE(after.count(narinfo(p))) << p;
  EXPECT_EQ(after.size() + 4, before.size());

  // A second run finds nothing more to do.
  json again = farm_->kilnJson(gc);
  EXPECT_TRUE(again.at("narinfos").empty());
  EXPECT_TRUE(again.at("nars").empty());

  // The pinned closure still substitutes with the real nix.
  if (!test::haveProgram("nix")) GTEST_SKIP() << "nix is not installed";
  std::string root = dir_.path() + "/nixroot";
  auto copied = s3_->nixCopy("farm", readFile(kit_->publicKeyFile), root,
                             first["kept"], dir_.path() + "/xdg");
  ASSERT_EQ(copied.exitCode, 0) << copied.err;
  EXPECT_EQ(readFile(root + first["kept"] + "/k.txt"), "k\n");
}

TEST_P(CacheGc, AnUnreachableCacheIsAnErrorNamingIt) {
  farm_->startScheduler();
  std::string uri = s3_->uri("farm");  // the gateway is not running
  auto r = farm_->kiln({"cache", "gc", "--cache", uri, "--dry-run"});
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(uri));
}

}  // namespace
}  // namespace kiln
