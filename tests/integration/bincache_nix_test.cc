// The scheduler's HTTP binary cache and the real Nix 2.8: `nix copy --from
// http://127.0.0.1:PORT` substitutes a closure of kiln's central store into
// a throwaway chroot store (`local?root=<tmp>`) with the farm's public key
// trusted, in every compression, and the copy verifies; with another key
// Nix refuses it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln/store/local_store.h"
#include "kiln/store/nar.h"
#include "kiln_process.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using namespace kiln::store;

class BinaryCacheNix : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::haveProgram("nix")) GTEST_SKIP() << "nix is not installed";
    setenv("NIX_CONFIG",
           "build-users-group =\nexperimental-features = nix-command\n"
           "substituters =\nrequire-sigs = true\n",
           1);
    setenv("XDG_CACHE_HOME", (tmp_.path() + "/xdg").c_str(), 1);
    // A closure in kiln's central store: an input-addressed path (so only
    // a signature makes Nix accept it) referring to a text path and to a
    // tree with an executable and a symlink.
    LocalStore st(state_);
    dep_ = sd_.printPath(st.addText("dep.txt", "dependency\n", {}));
    createDirs(dir("tree/sub"));
    writeFile(dir("tree/sub/data"), std::string(300000, 'x'));
    writeFile(dir("tree/run.sh"), "#!/bin/sh\necho hi\n");
    ::chmod(dir("tree/run.sh").c_str(), 0755);
    auto tree = st.addPath(dir("tree"));
    auto mainPath = sd_.makeOutputPath(
        "out", hashString(HashAlgo::kSha256, "bincache-it"), "kiln-main");
    StringSink nar;
    dumpString("uses " + dep_ + " " + sd_.printPath(tree) + "\n", nar);
    ValidPathInfo info(mainPath);
    info.narHash = hashString(HashAlgo::kSha256, nar.s);
    info.narSize = nar.s.size();
    info.references = {st.parsePath(dep_), tree};
    StringSource src(nar.s);
    st.addFromNar(info, src);
    main_ = sd_.printPath(mainPath);
    auto r = test::run({test::kilnBinary(), "store", "generate-key",
                        "farm-it-1", "--secret-key-file", dir("sk"),
                        "--public-key-file", dir("pk")});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    r = test::run({test::kilnBinary(), "store", "generate-key", "farm-it-1",
                   "--secret-key-file", dir("sk2"), "--public-key-file",
                   dir("pk2")});
    ASSERT_EQ(r.exitCode, 0) << r.err;
  }

  std::string dir(const std::string& name) const {
    return tmp_.path() + "/" + name;
  }
  // A scheduler serving the cache with `compression`; returns its URL.
  std::string startScheduler(const std::string& compression) {
    int port = test::freeLoopbackPort();
    sched_ = std::make_unique<test::KilnProcess>(
        std::vector<std::string>{
            "scheduler", "--state-dir", state_, "--listen", "tcp://127.0.0.1:*",
            "--insecure-plaintext", "--web-listen",
            "127.0.0.1:" + std::to_string(port), "--cache-secret-key-file",
            dir("sk"), "--cache-compression", compression},
        dir("sched-" + compression + ".log"));
    // The line that names the web address comes once the web is up.
    EXPECT_TRUE(sched_->waitForLog(" web http://", 30s)) << sched_->log();
    return "http://127.0.0.1:" + std::to_string(port);
  }
  test::RunResult copy(const std::string& url, const std::string& target,
                       const std::string& key) {
    return test::run({"nix", "copy", "--from", url, "--to",
                      "local?root=" + dir(target), "--option",
                      "trusted-public-keys", key, main_});
  }

  TempDir tmp_{"bincache-nix"};
  std::string state_ = tmp_.path() + "/state";
  StoreDir sd_;
  std::string main_, dep_;
  std::unique_ptr<test::KilnProcess> sched_;
};

TEST_F(BinaryCacheNix, NixCopiesFromKilnsCacheOnlyWithItsKey) {
  for (std::string comp : {"zstd", "xz", "none"}) {
    SCOPED_TRACE(comp);
    auto url = startScheduler(comp);
    EXPECT_THAT(test::httpGet(std::stoi(url.substr(url.rfind(':') + 1)),
                              "/nix-cache-info"),
                HasSubstr("StoreDir: /nix/store"));
    // Another key (same name, other bytes): refused, nothing copied.
    auto wrong = copy(url, "wrong-" + comp, readFile(dir("pk2")));
    EXPECT_NE(wrong.exitCode, 0);
    EXPECT_THAT(wrong.err, HasSubstr("lacks a valid signature"));
    auto q =
        test::run({"nix-store", "--store", "local?root=" + dir("wrong-" + comp),
                   "--check-validity", main_});
    EXPECT_NE(q.exitCode, 0) << "a refused path became valid";
    // The farm's key: the closure arrives and verifies.
    auto ok = copy(url, "nix-" + comp, readFile(dir("pk")));
    ASSERT_EQ(ok.exitCode, 0) << ok.err << sched_->log();
    std::string target = "local?root=" + dir("nix-" + comp);
    auto closure = test::run({"nix-store", "--store", target, "-qR", main_});
    EXPECT_EQ(test::nonEmptyLines(closure.out).size(), 3u) << closure.out;
    auto verify = test::run(
        {"nix-store", "--store", target, "--verify", "--check-contents"});
    EXPECT_EQ(verify.exitCode, 0) << verify.err;
    auto sigs =
        test::run({"nix", "path-info", "--store", target, "--sigs", main_});
    EXPECT_THAT(sigs.out, HasSubstr("farm-it-1:"));
    EXPECT_THAT(readFile(dir("nix-" + comp) + main_),
                HasSubstr("uses " + dep_));
    EXPECT_EQ(sched_->stop(30s), 0) << sched_->log();
  }
}

// The closure of a build the farm ran (not one registered by hand): a
// worker builds `top`, which names `dep`; the outputs reach the central
// store, and Nix substitutes `top` with `dep` from the scheduler's cache.
TEST_F(BinaryCacheNix, NixSubstitutesAClosureTheFarmBuilt) {
  if (std::string why; !test::Farm::canRun(&why)) GTEST_SKIP() << why;
  int port = test::freeLoopbackPort();
  std::string url = "http://127.0.0.1:" + std::to_string(port);
  test::FarmOptions options;
  options.schedulerArgs = {"--web-listen", "127.0.0.1:" + std::to_string(port),
                           "--cache-secret-key-file", dir("sk")};
  test::Farm farm(options);
  farm.startScheduler();
  ASSERT_TRUE(farm.scheduler().waitForLog(" web " + url, 30s))
      << farm.scheduler().log();
  farm.addWorker();
  ASSERT_TRUE(farm.waitForWorkers(1, 60s));
  farm.createJobset("p", "j", farm.writeCollection("coll", R"({
  top = mk "top" "echo $deps > $out; cat $deps >> $out" [ (mk "dep" "echo dep-built > $out" []) ];
})"));
  int64_t eval = farm.evaluate("p", "j");
  ASSERT_TRUE(farm.waitForBuilds(eval, 120s));
  auto outputs = farm.view()->outputs(eval);
  ASSERT_EQ(outputs.size(), 1u);
  std::string top = outputs[0].path;
  auto got = test::run({"nix", "copy", "--from", url, "--to",
                        "local?root=" + dir("farm-nix"), "--option",
                        "trusted-public-keys", readFile(dir("pk")), top});
  ASSERT_EQ(got.exitCode, 0) << got.err << farm.scheduler().log();
  std::string target = "local?root=" + dir("farm-nix");
  auto closure = test::run({"nix-store", "--store", target, "-qR", top});
  EXPECT_EQ(test::nonEmptyLines(closure.out).size(), 2u) << closure.out;
  EXPECT_THAT(closure.out, HasSubstr("-dep\n"));
  EXPECT_EQ(test::run({"nix-store", "--store", target, "--verify",
                       "--check-contents"})
                .exitCode,
            0);
  // top names dep (so dep is in its closure) and holds what dep built.
  EXPECT_THAT(readFile(dir("farm-nix") + top),
              HasSubstr("-dep\ndep-built\n"));
}

}  // namespace
}  // namespace kiln
