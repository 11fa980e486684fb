// `kiln store add/path-info/query/gc/verify` end to end: paths as real Nix
// computes them, exit codes from cli/src/command.h, GC roots made by
// `kiln instantiate --add-root`.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

class StoreCli : public ::testing::Test {
 protected:
  test::RunResult kiln(std::vector<std::string> args) {
    args.insert(args.begin(), test::kilnBinary());
    args.push_back("--state-dir");
    args.push_back(state_);
    return test::run(args);
  }
  std::string makeTree() {
    std::string t = dir_.path() + "/tree";
    createDirs(t + "/sub");
    writeFile(t + "/a.txt", "alpha\n");
    writeFile(t + "/sub/run.sh", "#!/bin/sh\necho hi\n");
    chmod((t + "/sub/run.sh").c_str(), 0755);
    symlink("a.txt", (t + "/link").c_str());
    return t;
  }
  TempDir dir_{"kiln-cli"};
  std::string state_ = dir_.path() + "/state";
};

TEST_F(StoreCli, AddMatchesNixStoreAdd) {
  auto tree = makeTree();
  auto ours = kiln({"store", "add", tree});
  ASSERT_EQ(ours.exitCode, 0) << ours.err;
  if (!test::haveProgram("nix-store")) GTEST_SKIP() << "nix-store not installed";
  auto nix = test::run({"nix-store", "--add", tree});
  ASSERT_EQ(nix.exitCode, 0) << nix.err;
  EXPECT_EQ(ours.out, nix.out);
  std::string path = ours.out.substr(0, ours.out.size() - 1);
  auto info = kiln({"store", "path-info", "--json", path});
  auto nixInfo = test::run({"nix-store", "--query", "--hash", path});
  ASSERT_EQ(info.exitCode, 0);
  EXPECT_NE(info.out.find("\"narSize\""), std::string::npos);
  // Nix prints sha256:<nix32>; our text form prints the same.
  auto text = kiln({"store", "path-info", path});
  EXPECT_NE(text.out.find("NarHash: " + nixInfo.out.substr(0, nixInfo.out.size() - 1)),
            std::string::npos)
      << text.out << nixInfo.out;
}

TEST_F(StoreCli, ExitCodes) {
  auto tree = makeTree();
  EXPECT_EQ(kiln({"store", "add", dir_.path() + "/missing"}).exitCode, 4);
  EXPECT_EQ(kiln({"store", "add", "--bogus"}).exitCode, 2);
  EXPECT_EQ(kiln({"store", "path-info"}).exitCode, 2);
  EXPECT_EQ(kiln({"store", "path-info", "/nix/store/" + std::string(32, 'a') + "-x"}).exitCode, 4);
  EXPECT_EQ(kiln({"store", "path-info", "/not/a/store/path"}).exitCode, 3);
  auto added = kiln({"store", "add", tree});
  ASSERT_EQ(added.exitCode, 0);
  std::string path = added.out.substr(0, added.out.size() - 1);
  EXPECT_EQ(kiln({"store", "query", path}).exitCode, 2);
  auto req = kiln({"store", "query", "--requisites", path});
  EXPECT_EQ(req.exitCode, 0);
  EXPECT_EQ(req.out, added.out);
  EXPECT_EQ(kiln({"store", "query", "--references", path}).out, "");
  EXPECT_EQ(kiln({"store", "verify"}).exitCode, 0);
  std::string file = state_ + "/store/" + path.substr(11) + "/a.txt";
  chmod(file.c_str(), 0644);
  writeFile(file, "tampered\n");
  auto bad = kiln({"store", "verify", "--json"});
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_NE(bad.out.find("hash-mismatch"), std::string::npos) << bad.out;
}

TEST_F(StoreCli, GcDeletesOnlyUnrootedPaths) {
  auto tree = makeTree();
  // A .drv (and the source it names) kept alive by an indirect root, as
  // `nix-instantiate --add-root` makes one.
  writeFile(tree + "/default.nix",
            "derivation { name = \"rooted\"; system = \"x86_64-linux\";\n"
            "  builder = \"/bin/sh\"; src = ./a.txt; }\n");
  std::string root = dir_.path() + "/rooted.drv";
  auto inst = kiln({"instantiate", "--add-root", root, tree + "/default.nix"});
  ASSERT_EQ(inst.exitCode, 0) << inst.err;
  std::string drv = std::filesystem::read_symlink(root).string();
  ASSERT_EQ(drv.rfind("/nix/store/", 0), 0u) << drv;
  auto closure = kiln({"store", "query", "--requisites", drv});
  ASSERT_EQ(closure.exitCode, 0) << closure.err;
  EXPECT_NE(closure.out.find("-a.txt\n"), std::string::npos) << closure.out;
  auto loose = kiln({"store", "add", "--name", "loose", tree + "/a.txt"});
  ASSERT_EQ(loose.exitCode, 0);
  auto dry = kiln({"store", "gc", "--dry-run"});
  EXPECT_EQ(dry.exitCode, 0);
  EXPECT_NE(dry.out.find(loose.out), std::string::npos) << dry.out;
  auto gc = kiln({"store", "gc"});
  EXPECT_NE(gc.out.find("1 store paths deleted"), std::string::npos) << gc.out;
  std::string looseBase = loose.out.substr(11, loose.out.size() - 12);
  EXPECT_FALSE(pathExists(state_ + "/store/" + looseBase));
  EXPECT_TRUE(pathExists(state_ + "/store/" + drv.substr(11)));
  EXPECT_EQ(kiln({"store", "verify"}).exitCode, 0);
  EXPECT_EQ(kiln({"store", "gc"}).out.find("0 store paths deleted"), 0u);
  // Without the root, the .drv and its source go too.
  ASSERT_EQ(unlink(root.c_str()), 0);
  EXPECT_NE(kiln({"store", "gc"}).out.find("2 store paths deleted"), std::string::npos);
  EXPECT_FALSE(pathExists(state_ + "/store/" + drv.substr(11)));
}

}  // namespace
}  // namespace kiln
