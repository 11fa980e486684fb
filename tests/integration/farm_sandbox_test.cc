// A farm whose worker runs `kiln worker`'s default sandbox (started without
// --sandbox: `linux`, with the default extra paths /bin /usr/bin /lib
// /lib64 /usr/lib, as its /metrics shows, with no warning): a builder using
// host tools builds; one reading a file of the host outside those paths
// fails, and so does one writing next to it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "farm.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;

TEST(FarmSandbox, DefaultLinuxSandboxBuildsAndIsolates) {
  std::string why;
  if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
  test::Farm farm;
  writeFile(farm.dir() + "/host-secret", "SECRET\n");
  auto coll =
      farm.writeCollection("coll",
                           "{ ok = mk \"ok\" \"echo hi | cat > $out\" [];\n"
                           "  peek = mk \"peek\" \"cat " +
                               farm.dir() +
                               "/host-secret > $out\" [];\n"
                               "  poke = mk \"poke\" \"echo x > " +
                               farm.dir() + "/poked && echo > $out\" []; }");
  farm.startScheduler();
  int port = test::freeLoopbackPort();
  auto worker = test::WorkerOptions::withSlots(1);
  worker.extraArgs = {"--metrics-listen", "127.0.0.1:" + std::to_string(port)};
  if (auto skip = farm.addSandboxedWorker(worker); !skip.empty())
    GTEST_SKIP() << skip;
  farm.createJobset("p", "sandboxed", coll);
  int64_t eval = farm.evaluate("p", "sandboxed");
  ASSERT_TRUE(farm.waitForBuilds(eval, 120s)) << farm.worker(0).log();
  std::map<std::string, int> status;
  for (auto& b : farm.builds(eval)) status[b.job] = b.status;
  EXPECT_EQ(status["ok"], 0) << farm.worker(0).log();
  EXPECT_EQ(status["peek"], 1);
  EXPECT_EQ(status["poke"], 1);
  EXPECT_FALSE(pathExists(farm.dir() + "/poked"));
  // The default is the linux sandbox, and it does not warn.
  std::string m = test::httpGet(port, "/metrics");
  EXPECT_THAT(m, testing::HasSubstr("kiln_plugin_builds_total{kind=\"sandbox\","
                                    "plugin=\"linux\"} 3"))
      << m;
  EXPECT_THAT(farm.worker(0).log(),
              testing::Not(testing::HasSubstr("does not isolate")));
  EXPECT_EQ(farm.stopWorker(0), 0);
  EXPECT_EQ(farm.stopScheduler(), 0);
}

}  // namespace
}  // namespace kiln
