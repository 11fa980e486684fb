// Derivations written by the real nix-instantiate (2.8) into a throwaway
// chroot store: kiln must parse and print every .drv byte for byte,
// recompute the same output and .drv paths, and its `store
// show-derivation` must print what `nix show-derivation` prints.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>

#include "kiln/common/file.h"
#include "kiln/store/derivation.h"
#include "test_support.h"

namespace kiln::store {
namespace {

namespace fs = std::filesystem;

/// The non-empty lines of a command's output.
const auto lines = test::nonEmptyLines;

class DrvRoundTrip : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::haveProgram("nix-instantiate"))
      GTEST_SKIP() << "nix-instantiate is not installed";
    storeUri_ = "local?root=" + tmp_.path() + "/root";
    physical_ = tmp_.path() + "/root/nix/store";
  }

  /// Runs nix-instantiate on `file` into the chroot store; returns the
  /// .drv paths it printed.
  std::vector<std::string> instantiate(const std::string& file) {
    auto r = test::run({"nix-instantiate", "--store", storeUri_, file});
    EXPECT_EQ(r.exitCode, 0) << r.err;
    return lines(r.out);
  }

  std::vector<std::string> storeDrvs() const {
    std::vector<std::string> names;
    for (auto& e : fs::directory_iterator(physical_))
      if (e.path().extension() == ".drv")
        names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  /// Checks every .drv in the store; returns how many there were.
  size_t checkAll() {
    StoreDir sd;
    DrvHashCache cache(sd, fileDrvLoader(sd, physical_));
    auto names = storeDrvs();
    for (auto& name : names) {
      std::string file = physical_ + "/" + name;
      std::string bytes = readFile(file);
      Derivation drv = readDerivationFile(sd, file);
      EXPECT_EQ(printDerivation(sd, drv), bytes) << name;
      Derivation masked = drv;
      for (auto& [o, out] : masked.outputs) {
        out.path.reset();
        masked.env.erase(o);
      }
      fillOutputPaths(masked, cache);
      EXPECT_EQ(masked, drv) << name;
      EXPECT_EQ(derivationPath(sd, masked).baseName(), name);
    }
    EXPECT_LE(cache.loadCount(), names.size());
    return names.size();
  }

  /// Output paths Nix registered for `drvs` (`nix-store -q --outputs`).
  std::set<std::string> nixOutputs(const std::vector<std::string>& drvs) {
    std::vector<std::string> argv{"nix-store", "--store", storeUri_, "-q",
                                  "--outputs"};
    argv.insert(argv.end(), drvs.begin(), drvs.end());
    auto r = test::run(argv);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    auto l = lines(r.out);
    return {l.begin(), l.end()};
  }

  std::set<std::string> kilnOutputs(const std::vector<std::string>& drvs) {
    StoreDir sd;
    std::set<std::string> out;
    for (auto& d : drvs) {
      Derivation drv = readDerivationFile(sd, physical_ + "/" + baseNameOf(d));
      for (auto& [name, o] : drv.outputs) out.insert(sd.printPath(*o.path));
    }
    return out;
  }

  TempDir tmp_{"kiln-drv-it"};
  std::string storeUri_;
  std::string physical_;
};

TEST_F(DrvRoundTrip, GeneratedCollectionOf1000) {
  std::string coll = tmp_.path() + "/coll";
  auto gen =
      test::run({"python3", test::sharedDir() + "/bench/gen-collection.py",
                 "1000", coll});
  ASSERT_EQ(gen.exitCode, 0) << gen.err;
  auto t0 = std::chrono::steady_clock::now();
  auto drvs = instantiate(coll + "/default.nix");
  auto t1 = std::chrono::steady_clock::now();
  ASSERT_EQ(drvs.size(), 1000u);
  EXPECT_EQ(checkAll(), 1000u);
  auto t2 = std::chrono::steady_clock::now();
  EXPECT_EQ(kilnOutputs(drvs), nixOutputs(drvs));
  using ms = std::chrono::milliseconds;
  std::cout << "nix-instantiate: "
            << std::chrono::duration_cast<ms>(t1 - t0).count()
            << " ms; kiln parse+print+recompute of 1000 drvs: "
            << std::chrono::duration_cast<ms>(t2 - t1).count() << " ms\n";
}

TEST_F(DrvRoundTrip, VectorExpressions) {
  // The spec's expressions: escapes, several outputs, chains with sources,
  // fixed outputs in every notation, structured attrs, control bytes.
  std::vector<std::string> drvs;
  for (auto& e : fs::directory_iterator(test::vectorPath("drv")))
    if (e.path().extension() == ".nix")
      for (auto& d : instantiate(e.path().string())) drvs.push_back(d);
  ASSERT_EQ(drvs.size(), 16u);
  EXPECT_EQ(checkAll(), 16u);
  EXPECT_EQ(kilnOutputs(drvs), nixOutputs(drvs));
}

TEST_F(DrvRoundTrip, FloatingContentAddressedAndDeferred) {
  // Experimental ca-derivations: a floating output and a dependant whose
  // outputs stay deferred; both must round-trip and recompute.
  std::string file = tmp_.path() + "/ca.nix";
  writeFile(file, R"(rec {
  ca = derivation { name = "ca"; system = "x86_64-linux"; builder = "/bin/sh";
    args = [ "-c" "echo > $out" ]; __contentAddressed = true;
    outputHashMode = "recursive"; outputHashAlgo = "sha256"; };
  dep = derivation { name = "dep"; system = "x86_64-linux";
    builder = "/bin/sh"; args = [ "-c" "cat ${ca} > $out" ]; };
})");
  auto r = test::run({"nix-instantiate", "--extra-experimental-features",
                      "ca-derivations", "--store", storeUri_, file});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  ASSERT_EQ(lines(r.out).size(), 2u);
  EXPECT_EQ(checkAll(), 2u);
  StoreDir sd;
  DrvHashCache cache(sd, fileDrvLoader(sd, physical_));
  for (auto& d : lines(r.out)) EXPECT_TRUE(cache.isDeferred(sd.parsePath(d)));
}

TEST_F(DrvRoundTrip, ShowDerivationMatchesNix) {
  if (!test::haveProgram("nix")) GTEST_SKIP() << "nix is not installed";
  std::string coll = tmp_.path() + "/coll";
  ASSERT_EQ(
      test::run({"python3", test::sharedDir() + "/bench/gen-collection.py",
                 "60", coll})
          .exitCode,
      0);
  auto drvs = instantiate(coll + "/default.nix");
  for (auto& e : fs::directory_iterator(test::vectorPath("drv")))
    if (e.path().extension() == ".nix")
      for (auto& d : instantiate(e.path().string())) drvs.push_back(d);
  std::vector<std::string> nixArgv{
      "nix",         "--extra-experimental-features",
      "nix-command", "show-derivation",
      "--store",     storeUri_};
  std::vector<std::string> kilnArgv{test::kilnBinary(), "store",
                                    "show-derivation", "--check"};
  for (auto& d : drvs) {
    nixArgv.push_back(d);
    kilnArgv.push_back(physical_ + "/" + baseNameOf(d));
  }
  auto nix = test::run(nixArgv);
  ASSERT_EQ(nix.exitCode, 0) << nix.err;
  auto kiln = test::run(kilnArgv);
  ASSERT_EQ(kiln.exitCode, 0) << kiln.err;
  EXPECT_EQ(kiln.out, nix.out);
}

}  // namespace
}  // namespace kiln::store
