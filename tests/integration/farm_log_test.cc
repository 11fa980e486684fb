// `kiln log`: the log a real worker streamed for a real build is what the
// command prints, per attempt; a derivation never built gets exit 4 and a
// hint.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "farm.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

TEST(FarmLog, PrintsTheBuildersOutputOfTheLastAttempt) {
  std::string why;
  if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
  if (!test::haveProgram("nix-instantiate")) GTEST_SKIP() << "no Nix";
  test::Farm farm;
  std::string coll = farm.dir() + "/coll";
  createDirs(coll);
  writeFile(coll + "/default.nix", R"({
  talk = derivation { name = "talk"; system = "x86_64-linux";
    builder = "/bin/sh";
    args = [ "-c" "echo hello-from-the-builder; echo to-stderr >&2; echo done > $out" ]; };
})");
  farm.startScheduler();
  farm.addWorker(test::WorkerOptions::withSlots(1));
  ASSERT_TRUE(farm.waitForWorkers(1, 60s)) << farm.worker(0).log();
  farm.createJobset("p", "j", coll);
  int64_t eval = farm.evaluate("p", "j");
  ASSERT_TRUE(farm.waitForBuilds(eval, 120s)) << farm.scheduler().log();
  auto builds = farm.builds(eval);
  ASSERT_EQ(builds.size(), 1u);
  ASSERT_EQ(builds[0].status, 0) << builds[0].error;

  auto r = farm.kiln({"log", builds[0].drvPath});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("hello-from-the-builder\n"));
  EXPECT_THAT(r.out, HasSubstr("to-stderr\n"));
  // By base name, and the list of attempts.
  std::string base = builds[0].drvPath.substr(builds[0].drvPath.rfind('/') + 1);
  r = farm.kiln({"log", "--list", base});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::StartsWith("1\t"));

  r = farm.kiln({"log", "/nix/store/00000000000000000000000000000000-never.drv"});
  EXPECT_EQ(r.exitCode, 4);
  EXPECT_THAT(r.err, HasSubstr("no build log"));
  r = farm.kiln({"log", "--attempt", "7", base});
  EXPECT_EQ(r.exitCode, 4);
}

}  // namespace
}  // namespace kiln
