// Binary caches between kiln and the real Nix 2.8, each side in a throwaway
// store: Nix uses chroot stores (`local?root=<tmp>`, logical dir /nix/store)
// and kiln its own state directory, so nothing touches /nix.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "kiln/common/file.h"
#include "kiln/store/binary_cache.h"
#include "kiln/store/compression.h"
#include "kiln/store/local_store.h"
#include "kiln/store/nar.h"
#include "test_support.h"

namespace kiln {
namespace {

using namespace kiln::store;
namespace fs = std::filesystem;

const std::string kMain =
    "/nix/store/7zzljlcf6mdzr5g1358ry3rlgcm8kbf3-ref-main";

std::string lines(const std::vector<std::string>& v) {
  std::string s;
  for (auto& l : v) s += l + "\n";
  return s;
}

class CacheInterop : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::haveProgram("nix")) GTEST_SKIP() << "nix is not installed";
    // No build users, no substituters of the machine, nix-command on; a
    // private narinfo disk cache.
    setenv("NIX_CONFIG",
           "build-users-group =\nexperimental-features = nix-command\n"
           "substituters =\nrequire-sigs = true\n",
           1);
    setenv("XDG_CACHE_HOME", (tmp_.path() + "/xdg").c_str(), 1);
  }

  std::string dir(const std::string& name) const {
    return tmp_.path() + "/" + name;
  }
  std::string nixStore(const std::string& name) const {
    return "local?root=" + dir(name);
  }

  test::RunResult kiln(std::vector<std::string> args) {
    args.insert(args.begin(), test::kilnBinary());
    return test::run(args);
  }
  /// `kiln store <cmd> --state-dir <kiln state> args...`, which must succeed.
  std::string kilnStore(const std::string& cmd, std::vector<std::string> args) {
    args.insert(args.begin(), {"store", cmd, "--state-dir", state_});
    auto r = kiln(args);
    EXPECT_EQ(r.exitCode, 0) << "kiln store " << cmd << ": " << r.err;
    return r.out;
  }
  test::RunResult nix(std::vector<std::string> args) { return test::run(args); }
  std::string nixOk(std::vector<std::string> args) {
    auto r = nix(args);
    EXPECT_EQ(r.exitCode, 0) << args[0] << " " << args[1] << ": " << r.err;
    return r.out;
  }
  /// Makes a key pair with kiln; returns the public key text.
  std::string generateKey(const std::string& name, const std::string& sk,
                          const std::string& pk) {
    auto r = kiln({"store", "generate-key", name, "--secret-key-file", sk,
                   "--public-key-file", pk});
    EXPECT_EQ(r.exitCode, 0) << r.err;
    return readFile(pk);
  }

  TempDir tmp_{"cache-interop"};
  std::string state_ = tmp_.path() + "/kiln-state";
};

// (a) kiln imports a signed closure (Nix's vector cache), adds a closure of
// its own, writes signed caches in every compression, and Nix substitutes
// both closures from them into a fresh store; `nix-store --verify
// --check-contents` agrees. (b) With a wrong key, Nix refuses.
TEST_F(CacheInterop, NixSubstitutesFromKilnsSignedCache) {
  kilnStore("copy-from-cache",
            {"--from", "file://" + test::vectorPath("cache/cache-none"),
             "--trusted-public-key-file", test::vectorPath("cache/public.key"),
             kMain});
  // A closure kiln makes itself: an input-addressed path referring to a
  // text path (so a signature is required for it).
  std::string own, ownDep;
  {
    LocalStore store(state_);
    auto dep = store.addText("kiln-dep.txt", "dependency\n", {});
    StoreDir sd;
    auto mainPath = sd.makeOutputPath(
        "out", hashString(HashAlgo::kSha256, "kiln-it"), "kiln-main");
    StringSink nar;
    dumpString("uses " + sd.printPath(dep) + "\n", nar);
    ValidPathInfo info(mainPath);
    info.narHash = hashString(HashAlgo::kSha256, nar.s);
    info.narSize = nar.s.size();
    info.references = {dep};
    StringSource src(nar.s);
    store.addFromNar(info, src);
    own = sd.printPath(mainPath);
    ownDep = sd.printPath(dep);
  }
  auto pk = generateKey("kiln-it-1", dir("sk"), dir("pk"));
  generateKey("kiln-it-2", dir("sk2"), dir("pk2"));
  for (std::string comp : {"none", "xz", "zstd"}) {
    SCOPED_TRACE(comp);
    auto cache = "file://" + dir("cache-" + comp);
    kilnStore("copy-to-cache",
              {"--to", cache, "--compression", comp, "--secret-key-file",
               dir("sk"), "--write-nar-listing", kMain, own});
    // (b) wrong key (another key, or the right bytes under another name).
    for (auto wrong :
         {readFile(dir("pk2")), "other-name:" + pk.substr(pk.find(':') + 1)}) {
      auto r = nix({"nix", "copy", "--from", cache, "--to",
                    nixStore("wrong-" + comp), "--option",
                    "trusted-public-keys", wrong, kMain, own});
      EXPECT_NE(r.exitCode, 0);
      EXPECT_NE(r.err.find("lacks a valid signature"), std::string::npos)
          << r.err;
      auto q = nix({"nix-store", "--store", nixStore("wrong-" + comp),
                    "--check-validity", kMain});
      EXPECT_NE(q.exitCode, 0) << "refused path became valid";
    }
    // (a) the right key.
    auto target = nixStore("nix-" + comp);
    nixOk({"nix", "copy", "--from", cache, "--to", target, "--option",
           "trusted-public-keys", pk, kMain, own});
    auto closure = nixOk({"nix-store", "--store", target, "-qR", kMain});
    EXPECT_EQ(
        closure,
        lines({"/nix/store/ckrdyfyx6vjdwgz3rncr0zv5h74mn99y-ref-dep2",
               "/nix/store/ifgfc5am64f55alrrck1m6xxqwdi95d1-ref-src.txt",
               "/nix/store/iv5jqk117k12swyn2qrgn75gq1n9szl8-ref-main-extra",
               "/nix/store/r4zq3683nfggrd8h6qiyddxw5v63hc3v-ref-dep1", kMain}));
    EXPECT_EQ(
        nixOk({"nix-store", "--store", target, "-q", "--references", own}),
        ownDep + "\n");
    nixOk({"nix-store", "--store", target, "--verify", "--check-contents"});
    auto info = nixOk({"nix", "path-info", "--store", target, "--sigs", kMain});
    EXPECT_NE(info.find("kiln-it-1:"), std::string::npos) << info;
  }
}

// (c) Nix writes caches (signed and not, every compression, with listings)
// from a store holding a .drv closure and a source tree; kiln imports and
// verifies them; its NAR hashes and listings agree with Nix's.
TEST_F(CacheInterop, KilnImportsNixsCache) {
  auto src = nixStore("nix-src");
  fs::create_directories(dir("tree/sub"));
  writeFile(dir("tree/sub/data"), "some data\n");
  writeFile(dir("tree/run.sh"), "#!/bin/sh\necho hi\n");
  fs::permissions(dir("tree/run.sh"), fs::perms::owner_exec,
                  fs::perm_options::add);
  fs::create_symlink("sub/data", dir("tree/link"));
  auto tree = nixOk({"nix-store", "--store", src, "--add", dir("tree")});
  tree.pop_back();
  auto drv = nixOk(
      {"nix-instantiate", "--store", src, "-E",
       "let a = builtins.toFile \"a.txt\" \"alpha\"; "
       "b = builtins.toFile \"b.txt\" \"uses ${a}\"; in "
       "derivation { name = \"c\"; system = \"x86_64-linux\"; "
       "builder = \"/bin/sh\"; args = [ \"-c\" \"cat ${b} > $out\" ]; }"});
  drv.pop_back();
  auto closure = nixOk({"nix-store", "--store", src, "-qR", drv});
  ASSERT_EQ(std::count(closure.begin(), closure.end(), '\n'), 3) << closure;
  nixOk({"nix-store", "--generate-binary-cache-key", "nix-it-1", dir("nixsk"),
         dir("nixpk")});

  for (std::string comp : {"none", "xz", "zstd"}) {
    for (bool signed_ : {true, false}) {
      SCOPED_TRACE(comp + (signed_ ? " signed" : " unsigned"));
      auto name = "nixcache-" + comp + (signed_ ? "-s" : "-u");
      std::string uri = "file://" + dir(name) + "?compression=" + comp +
                        "&write-nar-listing=true";
      if (signed_) uri += "&secret-key=" + dir("nixsk");
      nixOk({"nix", "copy", "--derivation", "--store", src, "--to", uri, drv});
      nixOk({"nix", "copy", "--store", src, "--to", uri, tree});
      state_ = dir("kiln-" + name);
      std::vector<std::string> args = {"--from", "file://" + dir(name), drv,
                                       tree};
      if (signed_) {
        args.insert(args.end(), {"--trusted-public-key-file", dir("nixpk")});
      }
      // Unsigned: accepted because every path is content-addressed.
      auto out = kilnStore("copy-from-cache", args);
      EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 4) << out;
      LocalStore store(state_);
      for (auto& p : {drv, tree}) {
        auto path = store.parsePath(p);
        auto info = store.queryPathInfo(path);
        ASSERT_TRUE(info) << p;
        auto nixHash = nixOk({"nix-store", "--store", src, "-q", "--hash", p});
        EXPECT_EQ(info->narHash.toNix32() + "\n", nixHash);
        EXPECT_FALSE(info->ca.empty());
        if (signed_) {
          EXPECT_EQ(info->sigs.size(), 1u);
        }
      }
      EXPECT_TRUE(store.verify().problems.empty());
      EXPECT_EQ(
          readFile(store.physicalPath(store.parsePath(tree)) + "/sub/data"),
          "some data\n");
      // Nix's listing of the tree equals kiln's listing of the same NAR.
      FileCacheStorage storage(dir(name));
      BinaryCacheReader reader(storage, StoreDir());
      auto ni = reader.queryNarInfo(store.parsePath(tree));
      ASSERT_TRUE(ni);
      EXPECT_EQ(ni->compression, comp);
      auto nar = reader.narSource(*ni);
      EXPECT_EQ(
          narListing(*nar),
          readFile(dir(name) + "/" + std::string(ni->path.hashPart()) + ".ls"));
    }
  }
}

// A signed cache read with the wrong key: kiln refuses input-addressed
// paths (here: the vector cache's closure, with a freshly made key of the
// same name); corrupt or missing data gives exit codes 3 and 4. The store
// stays empty throughout.
TEST_F(CacheInterop, KilnRefusesAWrongKey) {
  generateKey("test-cache-1", dir("sk"), dir("pk"));  // right name, other bytes
  auto r = kiln({"store", "copy-from-cache", "--state-dir", state_, "--from",
                 "file://" + test::vectorPath("cache/cache-xz"),
                 "--trusted-public-key-file", dir("pk"), kMain});
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_NE(r.err.find("lacks a valid signature"), std::string::npos) << r.err;
  // A truncated NAR: exit code 3 (malformed input); a missing path: 4.
  fs::copy(test::vectorPath("cache/cache-xz"), dir("bad"),
           fs::copy_options::recursive);
  for (auto& e : fs::recursive_directory_iterator(dir("bad")))
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  auto nar = dir(
      "bad/nar/0rgwrc49zijcvz2jw9lhsxz8ja7afm3420pyk4i6825y4znmah39.nar.xz");
  auto data = readFile(nar);
  writeFile(nar, data.substr(0, data.size() / 2));
  std::vector<std::string> args = {"store",
                                   "copy-from-cache",
                                   "--state-dir",
                                   state_,
                                   "--from",
                                   "file://" + dir("bad"),
                                   "--trusted-public-key-file",
                                   test::vectorPath("cache/public.key")};
  args.push_back(kMain);
  r = kiln(args);
  EXPECT_EQ(r.exitCode, 3) << r.err;
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
  args.back() = "/nix/store/00000000000000000000000000000000-missing";
  EXPECT_EQ(kiln(args).exitCode, 4);
  LocalStore store(state_);
  EXPECT_TRUE(store.queryAllValidPaths().empty());
}

}  // namespace
}  // namespace kiln
