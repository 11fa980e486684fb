// .drv identity: `kiln eval` must name and write every derivation exactly
// as the real nix-instantiate (2.8) does — the spec vectors and a generated
// collection of 10000 packages, compared path by path and byte by byte.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

using test::nonEmptyLines;

/// The value of string field `key` in one flat JSON line ("" if absent).
std::string jsonField(const std::string& line, const std::string& key) {
  std::string tag = "\"" + key + "\":\"";
  size_t at = line.find(tag);
  if (at == std::string::npos) return "";
  at += tag.size();
  return line.substr(at, line.find('"', at) - at);
}

class EvalDrvIdentity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::haveProgram("nix-instantiate")) GTEST_SKIP() << "nix-instantiate is not installed";
  }

  /// nix-instantiate FILE into the chroot store; the .drv paths it printed.
  std::set<std::string> nixDrvs(const std::string& file) {
    auto r = test::run({"nix-instantiate", "--store", "local?root=" + nixRoot_, file});
    EXPECT_EQ(r.exitCode, 0) << file << ": " << r.err;
    auto l = nonEmptyLines(r.out);
    return {l.begin(), l.end()};
  }

  /// kiln eval FILE writing into kilnRoot_; the drvPaths of its jobs.
  std::set<std::string> kilnDrvs(const std::string& file) {
    auto r = test::run({test::kilnBinary(), "eval", file, "--json", "--store-root", kilnRoot_});
    EXPECT_EQ(r.exitCode, 0) << file << ": " << r.err;
    std::set<std::string> out;
    for (auto& line : nonEmptyLines(r.out)) {
      EXPECT_EQ(jsonField(line, "error"), "") << line;
      out.insert(jsonField(line, "drvPath"));
    }
    return out;
  }

  /// Every regular file Nix wrote (.drv files, builtins.toFile results and
  /// single-file sources) exists in kiln's root with the same bytes;
  /// returns how many .drv files were compared.
  size_t compareStores() {
    size_t drvs = 0;
    for (auto& e : fs::directory_iterator(nixRoot_ + "/nix/store")) {
      std::string name = e.path().filename().string();
      if (name == ".links") continue;
      if (!e.is_regular_file()) continue;
      std::string mine = kilnRoot_ + "/nix/store/" + name;
      EXPECT_TRUE(pathExists(mine)) << name;
      if (!pathExists(mine)) continue;
      EXPECT_EQ(readFile(mine), readFile(e.path().string())) << name;
      drvs += e.path().extension() == ".drv";
    }
    return drvs;
  }

  TempDir tmp_{"kiln-eval-it"};
  std::string nixRoot_ = tmp_.path() + "/nixroot";
  std::string kilnRoot_ = tmp_.path() + "/kilnroot";
};

TEST_F(EvalDrvIdentity, SpecVectors) {
  std::string dir = test::vectorPath("drv");
  auto rows = test::readTsv(dir + "/index.tsv");
  ASSERT_GT(rows.size(), 1u);
  std::map<std::string, std::set<std::string>> expected;  // file → drv paths
  for (size_t i = 1; i < rows.size(); ++i) expected[rows[i][0]].insert(rows[i][2]);
  size_t total = 0;
  for (auto& [file, drvs] : expected) {
    auto nix = nixDrvs(dir + "/" + file);
    auto kiln = kilnDrvs(dir + "/" + file);
    EXPECT_EQ(kiln, nix) << file;
    for (auto& d : drvs) EXPECT_EQ(kiln.count(d), 1u) << file << ": " << d;
    total += drvs.size();
  }
  EXPECT_EQ(total, rows.size() - 1);
  // d4-src.txt is imported as a source path: both copy it.
  EXPECT_GE(compareStores(), total);
}

TEST_F(EvalDrvIdentity, GeneratedCollectionOf10000) {
  std::string coll = tmp_.path() + "/coll";
  auto gen = test::run({"python3", test::sharedDir() + "/bench/gen-collection.py", "10000", coll});
  ASSERT_EQ(gen.exitCode, 0) << gen.err;
  auto nix = nixDrvs(coll + "/default.nix");
  auto kiln = kilnDrvs(coll + "/default.nix");
  ASSERT_EQ(nix.size(), 10000u);
  EXPECT_EQ(kiln, nix);
  EXPECT_EQ(compareStores(), 10000u);
}

}  // namespace
}  // namespace kiln
