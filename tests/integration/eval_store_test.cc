// `kiln instantiate` / `kiln eval` writing into kiln's LocalStore: every
// object nix-instantiate writes (.drv files, toFile texts, sources from
// paths in strings, builtins.path, filterSource) is valid in kiln's store
// with the same bytes, NAR hash and references; --add-root makes a GC root
// that `kiln store gc` honours; --readonly-mode writes nothing.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "kiln/common/file.h"
#include "kiln/store/local_store.h"
#include "test_support.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

using test::nonEmptyLines;

// A collection touching every way an evaluation writes to the store.
constexpr const char* kCollection = R"(
let
  conf = builtins.toFile "conf" "hello from ${./hello.txt}";
  d1 = derivation { name = "d1"; system = "x86_64-linux"; builder = "/bin/sh";
                    args = [ "-c" "echo > $out" ]; src = ./hello.txt; };
  named = builtins.path { path = ./dir; name = "named-dir"; };
  filtered = builtins.filterSource (p: t: baseNameOf p != "skip") ./dir;
  flat = builtins.path { path = ./hello.txt; recursive = false; name = "flat"; };
in {
  inherit d1;
  d2 = derivation { name = "d2"; system = "x86_64-linux"; builder = "/bin/sh";
                    outputs = [ "out" "dev" ]; dep = d1; inherit conf named filtered flat; };
}
)";

class EvalStore : public ::testing::Test {
 protected:
  void SetUp() override {
    createDirs(src_ + "/dir/sub");
    writeFile(src_ + "/default.nix", kCollection);
    writeFile(src_ + "/hello.txt", "hello\n");
    writeFile(src_ + "/dir/a", "a\n");
    writeFile(src_ + "/dir/skip", "skipped\n");
    writeFile(src_ + "/dir/sub/run.sh", "#!/bin/sh\n");
    chmod((src_ + "/dir/sub/run.sh").c_str(), 0755);
    symlink("a", (src_ + "/dir/link").c_str());
  }

  test::RunResult kiln(std::vector<std::string> args) {
    args.insert(args.begin(), test::kilnBinary());
    args.insert(args.end(), {"--state-dir", state_});
    return test::run(args);
  }

  test::RunResult nix(std::vector<std::string> args) {
    args.insert(args.begin() + 1, {"--store", "local?root=" + nixRoot_});
    return test::run(args, "", {"NIX_CONF_DIR=" + nixConf()});
  }

  std::string nixConf() {
    std::string d = tmp_.path() + "/nixconf";
    if (!pathExists(d)) {
      createDirs(d);
      writeFile(d + "/nix.conf", "build-users-group =\n");
    }
    return d;
  }

  TempDir tmp_{"kiln-eval-store"};
  std::string src_ = tmp_.path() + "/src";
  std::string state_ = tmp_.path() + "/state";
  std::string nixRoot_ = tmp_.path() + "/nixroot";
};

TEST_F(EvalStore, InstantiateRegistersWhatNixRegisters) {
  if (!test::haveProgram("nix-instantiate"))
    GTEST_SKIP() << "nix-instantiate is not installed";
  auto ours = kiln({"instantiate", src_ + "/default.nix"});
  ASSERT_EQ(ours.exitCode, 0) << ours.err;
  EXPECT_NE(ours.err.find("you did not specify '--add-root'"),
            std::string::npos)
      << ours.err;
  auto theirs = nix({"nix-instantiate", src_ + "/default.nix"});
  ASSERT_EQ(theirs.exitCode, 0) << theirs.err;
  EXPECT_EQ(ours.out, theirs.out);
  ASSERT_EQ(nonEmptyLines(ours.out).size(), 2u);

  store::LocalStore store(state_);
  size_t compared = 0;
  for (auto& e : fs::directory_iterator(nixRoot_ + "/nix/store")) {
    std::string base = e.path().filename().string();
    if (base == ".links") continue;
    store::StorePath p(base);
    SCOPED_TRACE(base);
    ASSERT_TRUE(store.isValid(p));
    auto info = store.requirePathInfo(p);
    auto hash = nix({"nix-store", "-q", "--hash", store.printPath(p)});
    EXPECT_EQ(info.narHash.toNix32() + "\n", hash.out);
    std::set<std::string> refs;
    for (auto& r : info.references) refs.insert(store.printPath(r));
    auto nixRefs = nonEmptyLines(
        nix({"nix-store", "-q", "--references", store.printPath(p)}).out);
    EXPECT_EQ(refs, std::set<std::string>(nixRefs.begin(), nixRefs.end()));
    if (p.isDerivation()) {
      EXPECT_EQ(readFile(store.physicalPath(p)), readFile(e.path().string()));
    }
    ++compared;
  }
  // 2 .drv, toFile, hello.txt, named-dir, filtered dir, flat.
  EXPECT_EQ(compared, 7u);
  EXPECT_EQ(store.queryAllValidPaths().size(), compared);
  // The .drv's outputs are recorded as Nix records them.
  auto d2 = store.parsePath(nonEmptyLines(ours.out)[1]);
  auto outs = store.queryDerivationOutputs(d2);
  EXPECT_EQ(outs.size(), 2u);
  EXPECT_TRUE(outs.count("dev"));
}

TEST_F(EvalStore, EvalJsonWritesEachJobsClosure) {
  auto r = kiln({"eval", src_ + "/default.nix", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  store::LocalStore store(state_);
  auto jobs = nonEmptyLines(r.out);
  ASSERT_EQ(jobs.size(), 2u);
  for (auto& line : jobs) {
    auto at = line.find("\"drvPath\":\"") + 11;
    auto drv = store.parsePath(line.substr(at, line.find('"', at) - at));
    EXPECT_TRUE(store.isValid(drv)) << line;
  }
  // Everything written is reachable from the two .drv files; no root yet,
  // so a collection deletes all of it.
  auto gc = kiln({"store", "gc"});
  EXPECT_EQ(gc.exitCode, 0) << gc.err;
  EXPECT_TRUE(store.queryAllValidPaths().empty());
}

// A jobset writing a `.drv` with builtins.toFile that claims the output
// path of another derivation (to have its build registered there): the
// store refuses the `.drv` as it registers it, with the output named.
TEST_F(EvalStore, AToFileDrvClaimingAnotherOutputIsRefused) {
  writeFile(src_ + "/forged.nix", R"(
let
  victim = derivation { name = "victim"; system = "x86_64-linux"; builder = "/bin/sh";
                        args = [ "-c" "echo > $out" ]; };
  out = builtins.unsafeDiscardStringContext victim.outPath;
  forged = builtins.toFile "evil.drv" ''Derive([("out","${out}","","")],[],[],"x86_64-linux","/bin/sh",[],[("builder","/bin/sh"),("name","evil"),("out","${out}"),("system","x86_64-linux")])'';
in {
  inherit victim;
  evil = { type = "derivation"; name = "evil"; system = "x86_64-linux";
           drvPath = forged; outPath = out; };
}
)");
  auto r = kiln({"eval", src_ + "/forged.nix", "--json"});
  EXPECT_NE(r.exitCode, 0) << r.out;
  auto at = r.err.find("-evil.drv' has incorrect output 'out' '/nix/store/");
  ASSERT_NE(at, std::string::npos) << r.err;
  EXPECT_NE(r.err.find("-victim', should be '/nix/store/", at),
            std::string::npos)
      << r.err;
  store::LocalStore store(state_);
  for (auto& p : store.queryAllValidPaths())
    EXPECT_NE(p.name(), "evil.drv") << "the forged .drv was registered";
}

TEST_F(EvalStore, AddRootKeepsTheDrvThroughGc) {
  std::string root = tmp_.path() + "/result";
  auto r = kiln(
      {"instantiate", src_ + "/default.nix", "--add-root", root, "--indirect"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.err.find("--add-root'"), std::string::npos) << r.err;
  // Like nix-instantiate: the links are printed, the 2nd gets "-2".
  ASSERT_EQ(nonEmptyLines(r.out),
            (std::vector<std::string>{root, root + "-2"}));
  store::LocalStore store(state_);
  std::string d1 = fs::read_symlink(root).string();
  std::string d2 = fs::read_symlink(root + "-2").string();
  EXPECT_TRUE(d1.ends_with("-d1.drv")) << d1;
  EXPECT_TRUE(d2.ends_with("-d2.drv")) << d2;

  ASSERT_EQ(kiln({"store", "gc"}).exitCode, 0);
  EXPECT_TRUE(store.isValid(store.parsePath(d1)));
  EXPECT_TRUE(store.isValid(store.parsePath(d2)));
  EXPECT_EQ(store.queryAllValidPaths().size(), 7u);  // the closure stays too

  // Removing a link drops its root: d2 and what only it needs go.
  ASSERT_EQ(unlink((root + "-2").c_str()), 0);
  ASSERT_EQ(kiln({"store", "gc"}).exitCode, 0);
  EXPECT_FALSE(store.isValid(store.parsePath(d2)));
  EXPECT_TRUE(store.isValid(store.parsePath(d1)));
  EXPECT_EQ(store.queryAllValidPaths().size(), 2u);  // d1.drv and hello.txt

  // A regular file in the way is refused, not replaced.
  writeFile(tmp_.path() + "/taken", "mine");
  auto taken = kiln({"instantiate", src_ + "/default.nix", "-A", "d1",
                     "--add-root", tmp_.path() + "/taken"});
  EXPECT_EQ(taken.exitCode, 1);
  EXPECT_NE(taken.err.find("not a symlink"), std::string::npos) << taken.err;
  EXPECT_EQ(readFile(tmp_.path() + "/taken"), "mine");
}

TEST_F(EvalStore, ReadonlyModeWritesNothing) {
  auto ro = kiln({"instantiate", src_ + "/default.nix", "--readonly-mode"});
  ASSERT_EQ(ro.exitCode, 0) << ro.err;
  auto ev = kiln({"eval", src_ + "/default.nix", "--json", "--readonly-mode"});
  ASSERT_EQ(ev.exitCode, 0) << ev.err;
  EXPECT_FALSE(pathExists(state_));
  // Same paths as when writing.
  auto rw = kiln({"instantiate", src_ + "/default.nix"});
  EXPECT_EQ(rw.out, ro.out);
  EXPECT_TRUE(pathExists(state_));
}

TEST_F(EvalStore, StoreRootStillWritesAPlainDirectory) {
  std::string root = tmp_.path() + "/plain";
  auto r = kiln({"instantiate", src_ + "/default.nix", "--store-root", root});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  for (auto& drv : nonEmptyLines(r.out))
    EXPECT_TRUE(pathExists(root + drv)) << drv;
  EXPECT_FALSE(pathExists(state_));
  size_t objects = 0;
  for (auto& e : fs::directory_iterator(root + "/nix/store"))
    objects += !e.path().empty();
  EXPECT_EQ(objects, 7u);
}

}  // namespace
}  // namespace kiln
