// `kiln store dump|restore|hash` against the NAR vectors and nix-hash.
#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

class StoreNarCli : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = test::run({"sh", test::vectorPath("nar/make-trees.sh"), trees_});
    ASSERT_EQ(r.exitCode, 0) << r.err;
  }
  test::RunResult kiln(std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), test::kilnBinary());
    return test::run(args, input);
  }
  TempDir tmp_{"nar-cli"};
  std::string trees_ = tmp_.path() + "/trees";
};

TEST_F(StoreNarCli, HashMatchesTheVectorsAndNixHash) {
  auto rows = test::readTsv(test::vectorPath("nar/index.tsv"));
  for (size_t i = 1; i < rows.size(); ++i) {
    std::string path = trees_ + "/" + rows[i][0];
    auto r = kiln({"store", "hash", "--type", "sha256", "--base32", path});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out, rows[i][3] + "\n");
    EXPECT_EQ(kiln({"store", "hash", path}).out, rows[i][2] + "\n");
    EXPECT_EQ(kiln({"store", "hash", "--sri", path}).out, rows[i][4] + "\n");
    if (test::haveProgram("nix-hash")) {
      auto n = test::run({"nix-hash", "--type", "sha256", "--base32", path});
      EXPECT_EQ(r.out, n.out) << path;
    }
  }
  auto flat = kiln({"store", "hash", "--flat", "--base32", trees_ + "/t1-file"});
  EXPECT_EQ(flat.out, "094qif9n4cq4fdg459qzbhg1c6wywawwaaivx0k0x8xhbyx4vwic\n");
}

TEST_F(StoreNarCli, DumpAndRestoreRoundTrip) {
  std::string nar = readFile(test::vectorPath("nar/t5-tree.nar"));
  auto d = kiln({"store", "dump", trees_ + "/t5-tree"});
  ASSERT_EQ(d.exitCode, 0) << d.err;
  EXPECT_EQ(d.out, nar);
  std::string out = tmp_.path() + "/restored";
  auto r = kiln({"store", "restore", out}, nar);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(kiln({"store", "dump", out}).out, nar);
}

TEST_F(StoreNarCli, ExitCodes) {
  std::string nar = readFile(test::vectorPath("nar/t5-tree.nar"));
  std::string out = tmp_.path() + "/bad";
  auto r = kiln({"store", "restore", out}, nar.substr(0, 500));
  EXPECT_EQ(r.exitCode, 3);
  EXPECT_NE(r.err.find("NAR byte 500: archive is truncated"), std::string::npos) << r.err;
  EXPECT_FALSE(pathExists(out));
  EXPECT_EQ(kiln({"store", "restore", out}, nar + "x").exitCode, 3);
  EXPECT_FALSE(pathExists(out));
  EXPECT_EQ(kiln({"store", "hash", tmp_.path() + "/missing"}).exitCode, 4);
  EXPECT_EQ(kiln({"store", "dump"}).exitCode, 2);
  EXPECT_EQ(kiln({"store", "hash", "--type", "sha3", trees_}).exitCode, 2);
  for (const char* c : {"dump", "restore", "hash"}) {
    auto h = kiln({"store", c, "--help"});
    EXPECT_EQ(h.exitCode, 0);
    EXPECT_NE(h.out.find("Usage: kiln store"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln
