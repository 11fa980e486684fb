// Direct uploads (issue 32, docs/protocol.md "Direct uploads"): workers PUT
// their compressed outputs to staging/ of the farm's bucket on the real S3
// gateway through presigned URLs; the scheduler verifies each object
// before it publishes it. The real `nix` substitutes a closure built that
// way; a corrupted staged object is refused and its step retried; a worker
// that dies after staging leaves nothing behind once its step is retried;
// a scheduler killed between a staging and its publication publishes it
// once restarted, from the worker's re-announcement, without a rebuild; a
// worker process killed mid multipart upload resumes it once restarted,
// from its journal, without a rebuild.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln/store/binary_cache.h"
#include "kiln/store/local_store.h"
#include "kiln/store/signature.h"
#include "kiln_process.h"
#include "object_store.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// `app`'s output refers to `lib`'s: a closure of two built paths.
const char* kCollection = R"({
  lib = mk "lib" "mkdir $out; echo library > $out/lib.txt" [];
  app = mk "app" "mkdir $out; echo $deps > $out/uses; echo app > $out/app.txt"
    [ (mk "lib" "mkdir $out; echo library > $out/lib.txt" []) ];
})";

class FarmDirectUpload : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_UNLESS_FARM_CAN_RUN();
    std::string why;
    if (!test::ObjectStoreServer::canRun(&why)) GTEST_SKIP() << why;
    kit_ = std::make_unique<test::S3FarmKit>(dir_.path());
    s3_ = kit_->s3.get();
    s3_->start();
    s3_->createBucket("farm", true);
    test::FarmOptions o;
    o.heartbeat = heartbeat_;
    o.schedulerArgs = s3_->farmCacheArgs("farm", kit_->secretKeyFile);
    o.schedulerArgs.insert(o.schedulerArgs.end(),
                           {"--direct-uploads", "--retry-backoff-ms", "200"});
    o.schedulerArgs.insert(o.schedulerArgs.end(), extraArgs_.begin(),
                           extraArgs_.end());
    o.schedulerEnv = s3_->credentials();
    farm_ = std::make_unique<test::Farm>(o);
    farm_->startScheduler();
  }

  // A worker that uploads straight to the bucket compressing with
  // `compression` (with `extra` args).
  void addDirectWorker(std::vector<std::string> extra = {},
                       const std::string& compression = "zstd") {
    test::WorkerOptions w;
    w.extraArgs = {"--direct-uploads=" + compression};
    w.extraArgs.insert(w.extraArgs.end(), extra.begin(), extra.end());
    farm_->addWorker(w);
  }

  // Evaluates `collection` and waits for its builds, all successful.
  int64_t buildAll(const std::string& collection, size_t builds) {
    auto coll = farm_->writeCollection("coll", collection);
    farm_->createJobset("p", "j", coll);
    int64_t eval = farm_->evaluate("p", "j");
    EXPECT_TRUE(farm_->waitForBuilds(eval, 300s)) << logs();
    auto all = farm_->builds(eval);
    EXPECT_EQ(all.size(), builds);
    for (auto& b : all) EXPECT_EQ(b.status, 0) << b.job << ": " << b.error;
    return eval;
  }

  std::string logs() {
    std::string s = farm_->scheduler().log();
    for (size_t i = 0; i < farm_->workerCount(); ++i)
      s += "\n--- worker " + std::to_string(i) + "\n" + farm_->worker(i).log();
    return s;
  }

  // Every path of `eval` has a signed narinfo whose NAR is in the bucket
  // and hashes as the central store's copy.
  void expectPublished(int64_t eval) {
    store::StoreDir dir;
    store::LocalStore central(farm_->stateDir());
    for (auto& o : farm_->view()->outputs(eval)) {
      auto ni = kit_->signedNarInfo("farm", o.path);
      ASSERT_TRUE(ni) << o.path << " is not published";
      EXPECT_EQ(ni->compression, "zstd");
      auto info = central.queryPathInfo(dir.parsePath(o.path));
      ASSERT_TRUE(info) << o.path << " is not in the central store";
      EXPECT_EQ(ni->narHash, info->narHash) << o.path;
      EXPECT_EQ(ni->references, info->references) << o.path;
    }
  }

  std::vector<std::string> staging() {
    return store::S3CacheStorage(s3_->uri("farm")).list("staging/");
  }

  // The scheduler dies (fail point) once a worker staged `collection`'s
  // output, before verifying it; restarted, it publishes that staged
  // object when the worker comes back: no second attempt, no build again.
  void restartBetweenStagingAndPublication(const std::string& collection,
                                           const std::string& compression) {
    farm_->killScheduler();
    farm_->armSchedulerFailPoint("scheduler.direct.before-verify");
    farm_->startScheduler();
    addDirectWorker({}, compression);
    ASSERT_TRUE(farm_->waitForWorkers(1, 60s)) << logs();
    farm_->createJobset("p", "j", farm_->writeCollection("coll", collection));
    int64_t eval = farm_->evaluate("p", "j");
    ASSERT_TRUE(
        test::pollUntil([&] { return !farm_->scheduler().running(); }, 120s))
        << logs();
    store::S3CacheStorage s3(s3_->uri("farm"));
    for (auto& key : s3.list(""))
      EXPECT_FALSE(key.ends_with(".narinfo")) << key << " was published";
    EXPECT_FALSE(staging().empty() &&
                 s3.listMultipartUploads("staging/").empty())
        << "nothing was staged before the scheduler died";
    farm_->startScheduler();
    ASSERT_TRUE(farm_->waitForBuilds(eval, 300s)) << logs();
    auto builds = farm_->builds(eval);
    ASSERT_EQ(builds.size(), 1u);
    EXPECT_EQ(builds[0].status, 0) << builds[0].error;
    EXPECT_EQ(farm_->steps().at(0).attempts, 1) << logs();
    expectPublished(eval);
    EXPECT_THAT(farm_->scheduler().log(),
                HasSubstr("re-announced at staging/"));
    EXPECT_EQ(farm_->metric("kiln_direct_staged_objects_total"), 1.0);
    EXPECT_EQ(farm_->metric("kiln_direct_verify_failures_total"), 0.0);
    EXPECT_THAT(farm_->worker(0).log(),
                ::testing::Not(HasSubstr("uploading over the connection")));
    ASSERT_TRUE(test::pollUntil([&] { return staging().empty(); }, 30s))
        << "left in staging: " << staging().size();
    EXPECT_TRUE(s3.listMultipartUploads("staging/").empty());
  }

  std::vector<std::string> extraArgs_;  ///< more scheduler arguments
  std::chrono::milliseconds heartbeat_{1000};
  TempDir dir_{"kiln-farm-direct"};
  std::unique_ptr<test::S3FarmKit> kit_;
  test::ObjectStoreServer* s3_ = nullptr;  ///< kit_'s
  std::unique_ptr<test::Farm> farm_;
};

TEST_F(FarmDirectUpload, OutputsGoStraightToTheBucketAndNixSubstitutesThem) {
  addDirectWorker();
  ASSERT_TRUE(farm_->waitForWorkers(1, 60s)) << logs();
  int64_t eval = buildAll(kCollection, 2);
  expectPublished(eval);
  EXPECT_TRUE(staging().empty());
  EXPECT_EQ(farm_->metric("kiln_direct_staged_objects_total"), 2.0);
  EXPECT_GT(farm_->metric("kiln_direct_staged_bytes_total").value_or(0), 0);
  EXPECT_EQ(farm_->metric("kiln_direct_verify_seconds_count"), 2.0);
  EXPECT_EQ(farm_->metric("kiln_direct_verifier_queue"), 0.0);
  // No output travelled over the worker's connection.
  EXPECT_EQ(farm_->metric("kiln_transfer_bytes_received_total"), 0.0);
  EXPECT_THAT(farm_->worker(0).log(),
              ::testing::Not(HasSubstr("uploading over the connection")));

  if (!test::haveProgram("nix")) GTEST_SKIP() << "nix is not installed";
  std::string app, lib;
  for (auto& o : farm_->view()->outputs(eval))
    (o.path.ends_with("-app") ? app : lib) = o.path;
  std::string root = dir_.path() + "/nixroot";
  auto copied = s3_->nixCopy("farm", readFile(kit_->publicKeyFile), root,
                             app, dir_.path() + "/xdg");
  ASSERT_EQ(copied.exitCode, 0) << copied.err;
  EXPECT_EQ(readFile(root + app + "/app.txt"), "app\n");
  EXPECT_EQ(readFile(root + lib + "/lib.txt"), "library\n");
}

TEST_F(FarmDirectUpload, ACorruptedStagedObjectIsRefusedAndTheStepRetried) {
  addDirectWorker({"--debug-corrupt-uploads", "1"});
  ASSERT_TRUE(farm_->waitForWorkers(1, 60s)) << logs();
  int64_t eval = buildAll(
      R"({ big = mk "big" "for i in $(seq 1 20000); do echo line $i; done > $out" []; })",
      1);
  EXPECT_THAT(farm_->worker(0).log(),
              HasSubstr("corrupting the direct upload"));
  EXPECT_THAT(farm_->scheduler().log(),
              HasSubstr("direct upload of output out"));
  auto steps = farm_->steps();
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].attempts, 2) << "one refused staging, one retry";
  EXPECT_EQ(farm_->metric("kiln_direct_verify_failures_total"), 1.0);
  expectPublished(eval);
  EXPECT_TRUE(staging().empty());
  auto verify = farm_->kiln({"store", "verify"});
  EXPECT_EQ(verify.exitCode, 0) << verify.out << verify.err;
}

TEST_F(FarmDirectUpload, AWorkerThatDiesAfterStagingLeavesNothingBehind) {
  addDirectWorker({"--debug-exit-after-staging"});
  ASSERT_TRUE(farm_->waitForWorkers(1, 60s)) << logs();
  auto coll = farm_->writeCollection(
      "coll", R"({ one = mk "one" "echo one > $out" []; })");
  farm_->createJobset("p", "j", coll);
  int64_t eval = farm_->evaluate("p", "j");
  ASSERT_TRUE(
      test::pollUntil([&] { return !farm_->worker(0).running(); }, 120s))
      << logs();
  // Staged, never reported: not published, still in staging until the
  // scheduler declares the worker lost (three heartbeats).
  std::vector<std::string> left = staging();
  store::S3CacheStorage s3(s3_->uri("farm"));
  for (auto& key : s3.list(""))
    EXPECT_FALSE(key.ends_with(".narinfo")) << key << " was published";
  addDirectWorker();
  ASSERT_TRUE(farm_->waitForBuilds(eval, 300s)) << logs();
  auto builds = farm_->builds(eval);
  ASSERT_EQ(builds.size(), 1u);
  EXPECT_EQ(builds[0].status, 0) << builds[0].error;
  EXPECT_GE(farm_->steps().at(0).attempts, 2);
  expectPublished(eval);
  ASSERT_TRUE(test::pollUntil([&] { return staging().empty(); }, 30s))
      << "left in staging: " << staging().size();
  EXPECT_THAT(farm_->worker(0).log(), HasSubstr("exiting after staging"));
  EXPECT_FALSE(left.empty()) << "the dead worker's object was gone before "
                                "the scheduler declared it lost";
}

TEST_F(FarmDirectUpload, ARestartedSchedulerPublishesWhatWasStagedBefore) {
  restartBetweenStagingAndPublication(
      R"({ one = mk "one" "echo one > $out" []; })", "zstd");
}

// A scheduler without direct uploads (no bucket at all) refuses the
// worker's StageRequest; the worker uploads over its connection instead.
TEST(FarmDirectUploadRefused, TheWorkerUploadsOverItsConnectionInstead) {
  KILN_SKIP_UNLESS_FARM_CAN_RUN();
  test::Farm farm;
  farm.startScheduler();
  test::WorkerOptions w;
  w.extraArgs = {"--direct-uploads"};
  farm.addWorker(w);
  ASSERT_TRUE(farm.waitForWorkers(1, 60s)) << farm.worker(0).log();
  auto coll = farm.writeCollection("coll", kCollection);
  farm.createJobset("p", "j", coll);
  int64_t eval = farm.evaluate("p", "j");
  ASSERT_TRUE(farm.waitForBuilds(eval, 300s)) << farm.scheduler().log();
  for (auto& b : farm.builds(eval)) EXPECT_EQ(b.status, 0) << b.error;
  EXPECT_THAT(farm.worker(0).log(),
              HasSubstr("direct uploads are not enabled on this scheduler"));
  EXPECT_GT(farm.metric("kiln_transfer_bytes_received_total").value_or(0), 0);
  store::LocalStore central(farm.stateDir());
  for (auto& o : farm.view()->outputs(eval))
    EXPECT_TRUE(central.isValid(central.parsePath(o.path))) << o.path;
}

// Parts of 5 MiB (S3's smallest): an output of about 12 MiB goes up as a
// multipart upload through presigned part URLs, which the farm completes.
class FarmDirectUploadParts : public FarmDirectUpload {
 protected:
  FarmDirectUploadParts() { extraArgs_ = {"--direct-part-size", "5242880"}; }
};

TEST_F(FarmDirectUploadParts, ALargeOutputGoesUpInPresignedParts) {
  addDirectWorker({}, "xz");
  ASSERT_TRUE(farm_->waitForWorkers(1, 60s)) << logs();
  int64_t eval = buildAll(
      R"({ big = mk "big" "head -c 9000000 /dev/urandom | base64 > $out" []; })",
      1);
  store::S3CacheStorage s3(s3_->uri("farm"));
  auto out = farm_->view()->outputs(eval).at(0).path;
  auto ni = store::BinaryCacheReader(s3, store::StoreDir())
                .queryNarInfo(store::StoreDir().parsePath(out));
  ASSERT_TRUE(ni);
  EXPECT_EQ(ni->compression, "xz");
  EXPECT_GT(ni->fileSize, 5u << 20) << "not a multipart upload";
  EXPECT_TRUE(staging().empty());
  EXPECT_TRUE(s3.listMultipartUploads("staging/").empty());
  EXPECT_EQ(farm_->metric("kiln_transfer_bytes_received_total"), 0.0);
}

// The multipart upload the first scheduler started is completed by the
// restarted one (found by its key), from the ETags the worker re-announces.
TEST_F(FarmDirectUploadParts, ARestartedSchedulerCompletesAStagedMultipart) {
  restartBetweenStagingAndPublication(
      R"({ big = mk "big" "head -c 9000000 /dev/urandom | base64 > $out" []; })",
      "zstd");
}

// Parts of 5 MiB; a worker that kills itself (SIGKILL) once the first
// part of its multipart upload is up, then is restarted with the same
// state directory.
class FarmDirectUploadResume : public FarmDirectUploadParts {
 protected:
  // Builds an output of about 20 MiB (3 parts) that counts its builds in
  // runs_, on a worker that dies with one part up; returns the evaluation.
  int64_t killWorkerMidUpload() {
    addDirectWorker({"--debug-kill-after-parts", "1"});
    EXPECT_TRUE(farm_->waitForWorkers(1, 60s)) << logs();
    auto coll = farm_->writeCollection(
        "coll",
        R"({ big = mk "big" "echo run >> )" + runs_ +
            R"(; head -c 15000000 /dev/urandom | base64 > $out" []; })");
    farm_->createJobset("p", "j", coll);
    int64_t eval = farm_->evaluate("p", "j");
    EXPECT_TRUE(
        test::pollUntil([&] { return !farm_->worker(0).running(); }, 120s))
        << logs();
    EXPECT_THAT(farm_->worker(0).log(), HasSubstr("--debug-kill-after-parts"));
    return eval;
  }

  // Restarts the worker without the fault: `eval`'s output is built once,
  // in one attempt, published, and nothing stays in staging.
  void restartAndExpectOneBuild(int64_t eval) {
    farm_->workerOptions(0).extraArgs = {"--direct-uploads=zstd"};
    farm_->startWorker(0);
    ASSERT_TRUE(farm_->waitForBuilds(eval, 300s)) << logs();
    auto builds = farm_->builds(eval);
    ASSERT_EQ(builds.size(), 1u);
    EXPECT_EQ(builds[0].status, 0) << builds[0].error;
    EXPECT_EQ(readFile(runs_), "run\n") << "built again";
    EXPECT_EQ(farm_->steps().at(0).attempts, 1) << logs();
    expectPublished(eval);
    EXPECT_EQ(farm_->metric("kiln_direct_verify_failures_total"), 0.0);
    ASSERT_TRUE(test::pollUntil([&] { return staging().empty(); }, 30s))
        << "left in staging: " << staging().size();
    EXPECT_TRUE(store::S3CacheStorage(s3_->uri("farm"))
                    .listMultipartUploads("staging/")
                    .empty());
  }

  std::string runs_ = dir_.path() + "/runs";
};

// Heartbeats of 5 s (a worker is lost after 15 s): the worker comes back
// well before. It takes the step back from its upload journal, asks for
// the remaining parts of the same multipart upload and finishes it: the
// build ran once, one attempt, and the output is published and
// substitutable.
class FarmDirectUploadResumeSoon : public FarmDirectUploadResume {
 protected:
  FarmDirectUploadResumeSoon() { heartbeat_ = 5s; }
};

TEST_F(FarmDirectUploadResumeSoon, ARestartedWorkerResumesItsMultipartUpload) {
  int64_t eval = killWorkerMidUpload();
  store::S3CacheStorage s3(s3_->uri("farm"));
  ASSERT_EQ(s3.listMultipartUploads("staging/").size(), 1u) << logs();
  restartAndExpectOneBuild(eval);
  EXPECT_THAT(farm_->worker(0).log(), HasSubstr("(1 parts up already)"));
  EXPECT_THAT(farm_->scheduler().log(),
              HasSubstr("came back on another connection"));
  EXPECT_TRUE(test::pollUntil(
      [&] {
        return std::filesystem::is_empty(farm_->workerStateDir(0) + "/direct");
      },
      30s))
      << "the journal kept the step once its result was acknowledged";

  if (!test::haveProgram("nix")) GTEST_SKIP() << "nix is not installed";
  auto out = farm_->view()->outputs(eval).at(0).path;
  std::string root = dir_.path() + "/nixroot";
  auto copied = s3_->nixCopy("farm", readFile(kit_->publicKeyFile), root,
                             out, dir_.path() + "/xdg");
  ASSERT_EQ(copied.exitCode, 0) << copied.err;
  EXPECT_GT(readFile(root + out).size(), 15000000u);
}

// Heartbeats of 1 s: the killed worker is declared lost before it comes
// back, its attempt's multipart upload aborted. Restarted, it is given the
// step back (adopted), gets a new upload of the same key and PUTs its kept
// object again: no rebuild, one attempt.
TEST_F(FarmDirectUploadResume, AWorkerBackAfterItWasLostUploadsItsKeptObject) {
  int64_t eval = killWorkerMidUpload();
  store::S3CacheStorage s3(s3_->uri("farm"));
  ASSERT_TRUE(test::pollUntil(
      [&] {
        return farm_->scheduler().log().find("lost: no heartbeat") !=
                   std::string::npos &&
               s3.listMultipartUploads("staging/").empty();
      },
      60s))
      << logs();
  restartAndExpectOneBuild(eval);
  EXPECT_THAT(farm_->worker(0).log(), HasSubstr("(0 parts up already)"));
  EXPECT_THAT(farm_->scheduler().log(), HasSubstr("starting another"));
}

}  // namespace
}  // namespace kiln
