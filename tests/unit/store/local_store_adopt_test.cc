// LocalStore::adoptTree: a finished tree (a build's output) becomes a valid
// path by a move, checked as a NAR add is checked; failures leave nothing.
#include <sys/stat.h>

#include <algorithm>

#include "kiln/store/content_check.h"
#include "local_store_fixture.h"

namespace kiln::store::testing {
namespace {

class LocalStoreAdoptTest : public LocalStoreTest {
 protected:
  /// A tree like a build's output: a file, an executable, a symlink and a
  /// subdirectory, left writable with a recent mtime, at `where`.
  static void makeTree(const std::string& where, const std::string& text) {
    createDirs(where + "/bin");
    writeFile(where + "/README", text);
    writeFile(where + "/bin/tool", "#!/bin/sh\necho " + text + "\n");
    ASSERT_EQ(::chmod((where + "/bin/tool").c_str(), 0755), 0);
    ASSERT_EQ(::symlink("bin/tool", (where + "/run").c_str()), 0);
  }
  /// Info for the tree at `where` as `path` (its NAR hash and size).
  static ValidPathInfo infoOfTree(const StorePath& path,
                                  const std::string& where) {
    HashingSink h(HashAlgo::kSha256);
    dumpPath(where, h);
    auto [hash, size] = h.finish();
    ValidPathInfo info(path);
    info.narHash = hash;
    info.narSize = size;
    return info;
  }
  /// A tree made by makeTree at the physical path of `out`, and its info.
  static ValidPathInfo builtInPlace(LocalStore& store, const StorePath& out,
                                    const std::string& text) {
    makeTree(store.physicalPath(out), text);
    return infoOfTree(out, store.physicalPath(out));
  }
  /// Temporaries in the physical root.
  size_t temps() const {
    auto es = entries(state_ + "/store");
    return std::count_if(es.begin(), es.end(), [](auto& e) {
      return e.starts_with(kStoreTempPrefix);
    });
  }
};

TEST_F(LocalStoreAdoptTest, MovesATreeAtItsPhysicalPathAndMakesItCanonical) {
  LocalStore store(state_);
  StorePath out(std::string(32, 'a') + "-tool-1.0");
  auto info = builtInPlace(store, out, "hi");
  std::string phys = store.physicalPath(out);
  struct stat st;
  ASSERT_EQ(::lstat((phys + "/README").c_str(), &st), 0);
  ino_t inode = st.st_ino;

  store.adoptTree(info, phys);

  auto got = store.requirePathInfo(out);
  EXPECT_EQ(got.narHash, info.narHash);
  EXPECT_EQ(got.narSize, info.narSize);
  // The same file, moved, not copied; made read-only with mtime 1.
  ASSERT_EQ(::lstat((phys + "/README").c_str(), &st), 0);
  EXPECT_EQ(st.st_ino, inode);
  EXPECT_EQ(st.st_mode & 07777, 0444u);
  EXPECT_EQ(st.st_mtime, 1);
  ASSERT_EQ(::lstat((phys + "/bin/tool").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0555u);
  ASSERT_EQ(::lstat((phys + "/run").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(readFile(phys + "/README"), "hi");
  EXPECT_EQ(temps(), 0u);
  // Its NAR is what was announced.
  EXPECT_EQ(infoOfTree(out, phys).narHash, info.narHash);
}

TEST_F(LocalStoreAdoptTest, AMismatchRegistersNothingAndLeavesNothing) {
  LocalStore store(state_);
  StorePath out(std::string(32, 'b') + "-out");
  auto info = builtInPlace(store, out, "one");
  std::string phys = store.physicalPath(out);
  writeFile(phys + "/README", "two");  // changed after it was hashed
  EXPECT_THROW(store.adoptTree(info, phys), HashMismatchError);
  EXPECT_FALSE(store.isValid(out));
  EXPECT_FALSE(pathExists(phys));
  EXPECT_EQ(temps(), 0u);
  // A missing reference is refused the same way.
  StorePath other(std::string(32, 'c') + "-other");
  std::string elsewhere = dir_.path() + "/built";
  makeTree(elsewhere, "x");
  auto withRef = infoOfTree(out, elsewhere);
  withRef.references = {other};
  EXPECT_THROW(store.adoptTree(withRef, elsewhere), InvalidPathError);
  EXPECT_FALSE(store.isValid(out));
  EXPECT_FALSE(pathExists(elsewhere));
  EXPECT_EQ(temps(), 0u);
}

TEST_F(LocalStoreAdoptTest, ChecksTheContentAddressOfAFixedOutput) {
  LocalStore store(state_);
  std::string file = dir_.path() + "/src.tar";
  writeFile(file, "tarball bytes");
  Hash flat = hashString(HashAlgo::kSha256, "tarball bytes");
  auto path = store.storeDir().makeFixedOutputPath("src.tar", false, flat);
  // Other bytes under the CA field of the announced ones: the NAR hash
  // and size match what is there, the content does not.
  writeFile(file, "other bytes");
  auto wrong = infoOfTree(path, file);
  wrong.ca = makeFixedCa(false, flat);
  EXPECT_THROW(store.adoptTree(wrong, file), ContentMismatchError);
  EXPECT_FALSE(store.isValid(path));
  EXPECT_FALSE(pathExists(file));
  writeFile(file, "tarball bytes");
  auto info = infoOfTree(path, file);
  info.ca = makeFixedCa(false, flat);
  store.adoptTree(info, file);
  EXPECT_EQ(store.requirePathInfo(path).ca, info.ca);
  EXPECT_EQ(readFile(store.physicalPath(path)), "tarball bytes");
}

TEST_F(LocalStoreAdoptTest, AValidPathIsKeptAndTheTreeRemoved) {
  LocalStore store(state_);
  StorePath out(std::string(32, 'd') + "-out");
  std::string first = dir_.path() + "/first";
  makeTree(first, "same");
  auto info = infoOfTree(out, first);
  store.adoptTree(info, first);
  std::string second = dir_.path() + "/second";
  makeTree(second, "same");
  store.adoptTree(info, second);
  EXPECT_FALSE(pathExists(second));
  EXPECT_EQ(readFile(store.physicalPath(out) + "/README"), "same");
  EXPECT_EQ(temps(), 0u);
}

TEST_F(LocalStoreAdoptTest, ABatchAdoptsOutputsReferringToEachOther) {
  LocalStore store(state_);
  StorePath lib(std::string(32, 'g') + "-lib");
  StorePath bin(std::string(32, 'h') + "-bin");
  auto libInfo = builtInPlace(store, lib, "lib");
  auto binInfo = builtInPlace(store, bin, store.printPath(lib));
  binInfo.references = {lib};
  {
    LocalStore::Batch batch(store);
    batch.adoptTree(libInfo, store.physicalPath(lib));
    batch.adoptTree(binInfo, store.physicalPath(bin));
    EXPECT_FALSE(store.isValid(lib));
    batch.commit();
  }
  EXPECT_TRUE(store.isValid(lib));
  EXPECT_EQ(store.queryReferences(bin), StorePathSet{lib});
  EXPECT_EQ(temps(), 0u);
}

}  // namespace
}  // namespace kiln::store::testing
