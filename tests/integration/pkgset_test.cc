// The example package set (examples/pkgset: C libraries, programs, a shell
// tool, generated documentation, a fetched tarball) built twice from empty
// stores: by a kiln farm whose worker uses the `linux` sandbox, and by
// `nix-build` in Nix 2.8's sandbox, both seeing only the host paths the set
// declares in host.nix. Every job succeeds in kiln, and every output has
// the same path and the same bytes (NAR hash) in both stores; reproducible
// outputs are the whole set, so a difference is a failure naming the path.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "farm.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string kCollection =
    test::sourceDir() + "/examples/pkgset";

/// The host paths examples/pkgset/host.nix declares, space-separated.
std::string declaredSandboxPaths() {
  auto r = test::run({test::kilnBinary(), "instantiate", "--eval", "--strict",
                      "--json", "--readonly-mode", "-E",
                      "(import " + kCollection + "/host.nix).sandboxPaths"});
  if (r.exitCode != 0) throw Error("evaluating host.nix: " + r.err);
  std::string paths;
  for (auto& p : json::parse(r.out))
    paths += (paths.empty() ? "" : " ") + p.get<std::string>();
  return paths;
}

/// path → narHash from a `path-info --json` array (kiln's or Nix's).
std::map<std::string, std::string> narHashes(const std::string& jsonText) {
  std::map<std::string, std::string> out;
  for (auto& info : json::parse(jsonText))
    if (info.contains("narHash"))
      out[info["path"].get<std::string>()] = info["narHash"].get<std::string>();
  return out;
}

TEST(Pkgset, BuildsInKilnSandboxIdenticallyToNix) {
  std::string why;
  if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
  if (!test::haveProgram("nix-build")) GTEST_SKIP() << "nix-build missing";
  std::string paths = declaredSandboxPaths();
  test::Farm farm;
  farm.startScheduler();
  auto opts = test::WorkerOptions::withSlots(2);
  opts.extraArgs = {"--sandbox-option", "extra-paths=" + paths};
  if (auto skip = farm.addSandboxedWorker(opts); !skip.empty())
    GTEST_SKIP() << skip;
  farm.createJobset("examples", "pkgset", kCollection);
  int64_t eval = farm.evaluate("examples", "pkgset");
  ASSERT_TRUE(farm.waitForBuilds(eval, 600s)) << farm.worker(0).log();
  auto builds = farm.builds(eval);
  EXPECT_GE(builds.size(), 20u);
  for (auto& b : builds)
    EXPECT_EQ(b.status, 0) << b.job << "\n" << farm.worker(0).log();

  std::vector<std::string> kilnArgs = {test::kilnBinary(), "store",
                                       "path-info",        "--state-dir",
                                       farm.stateDir(),    "--json"};
  for (auto& o : farm.view()->outputs(eval)) kilnArgs.push_back(o.path);
  auto kilnInfo = test::run(kilnArgs);
  ASSERT_EQ(kilnInfo.exitCode, 0) << kilnInfo.err;
  auto kiln = narHashes(kilnInfo.out);
  ASSERT_GE(kiln.size(), builds.size());

  std::string nixStore = farm.dir() + "/nix";
  auto built = test::run({"nix-build",
                          "--store",
                          nixStore,
                          kCollection,
                          "--no-out-link",
                          "--option",
                          "sandbox",
                          "true",
                          "--option",
                          "build-users-group",
                          "",
                          "--option",
                          "substituters",
                          "",
                          "--option",
                          "sandbox-paths",
                          paths,
                          "--option",
                          "cores",
                          "1",
                          "-j",
                          "2"},
                         "", {"NIX_REMOTE="});
  ASSERT_EQ(built.exitCode, 0) << built.err;
  std::vector<std::string> nixArgs = {
      "nix",         "--extra-experimental-features",
      "nix-command", "path-info",
      "--store",     nixStore,
      "--json"};
  for (auto& [path, hash] : kiln) nixArgs.push_back(path);
  auto nixInfo = test::run(nixArgs, "", {"NIX_REMOTE="});
  ASSERT_EQ(nixInfo.exitCode, 0) << nixInfo.err;
  auto nix = narHashes(nixInfo.out);
  for (auto& [path, hash] : kiln)
    EXPECT_EQ(hash, nix[path]) << path << " differs between kiln and nix-build";
  EXPECT_EQ(farm.stopWorker(0), 0);
  EXPECT_EQ(farm.stopScheduler(), 0);
}

}  // namespace
}  // namespace kiln
