#include "kiln/store/local_store.h"

#include "kiln/common/sqlite.h"
#include "local_store_fixture.h"

namespace kiln::store::testing {
namespace {

TEST_F(LocalStoreTest, AddTextMatchesNixAndIsCanonical) {
  LocalStore store(state_);
  auto p = store.addText("t.txt", "hello", {});
  // vectors/db/sample-rows.txt: builtins.toFile "t.txt" "hello".
  EXPECT_EQ(store.printPath(p), "/nix/store/9p0nl625gm5mli8h2xfsgma0zz31g9yc-t.txt");
  auto info = store.requirePathInfo(p);
  EXPECT_EQ(info.narHash.toHex(),
            "0a430879c266f8b57f4092a0f935cf3facd48bbccde5760d4748ca405171e969");
  EXPECT_EQ(info.narSize, 120u);
  EXPECT_EQ(info.ca, "text:sha256:094qif9n4cq4fdg459qzbhg1c6wywawwaaivx0k0x8xhbyx4vwic");
  EXPECT_TRUE(info.references.empty());
  EXPECT_FALSE(info.deriver);
  EXPECT_GT(info.registrationTime, 1700000000);
  auto phys = store.physicalPath(p);
  EXPECT_EQ(phys, state_ + "/store/9p0nl625gm5mli8h2xfsgma0zz31g9yc-t.txt");
  EXPECT_EQ(readFile(phys), "hello");
  struct stat st;
  ASSERT_EQ(lstat(phys.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0444u);
  EXPECT_EQ(st.st_mtime, 1);
  // Adding again is a no-op; the row is stored as Nix stores it.
  EXPECT_EQ(store.addText("t.txt", "hello", {}), p);
  SqliteDb db(state_ + "/db/db.sqlite");
  auto row = db.prepare("select hash, ca, ultimate, sigs, deriver from ValidPaths");
  ASSERT_TRUE(row.step());
  EXPECT_EQ(row.getStr(0),
            "sha256:0a430879c266f8b57f4092a0f935cf3facd48bbccde5760d4748ca405171e969");
  EXPECT_TRUE(row.isNull(2) && row.isNull(3) && row.isNull(4));
  EXPECT_FALSE(row.step());
}

TEST_F(LocalStoreTest, AddPathMatchesNixStoreAdd) {
  auto in = makeInputs();
  LocalStore store(state_);
  auto rows = test::readTsv(test::vectorPath("src/index.tsv"));
  std::map<std::string, std::vector<std::string>> byAttr;
  for (auto& r : rows) byAttr[r[0]] = r;
  struct Case {
    std::string file, attr;
  };
  for (auto& c : {Case{"hello.txt", "fileInterp"}, Case{"tool.sh", "execInterp"},
                  Case{"dir", "dirInterp"}}) {
    auto& row = byAttr.at(c.attr);
    auto p = store.addPath(in + "/" + c.file);
    EXPECT_EQ(store.printPath(p), row[1]) << c.file;
    auto info = store.requirePathInfo(p);
    EXPECT_EQ(info.narHash.toHex(), row[2]);
    EXPECT_EQ(std::to_string(info.narSize), row[3]);
    EXPECT_EQ(info.ca, row[4]);
  }
  auto renamed = store.addPath(in + "/dir", "renamed");
  EXPECT_EQ(store.printPath(renamed), byAttr.at("pathNamed")[1]);
  // Modes: 0555 for dirs and executables, 0444 otherwise; symlinks kept.
  auto root = store.physicalPath(renamed);
  struct stat st;
  ASSERT_EQ(lstat(root.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0555u);
  EXPECT_EQ(st.st_mtime, 1);
  ASSERT_EQ(lstat((root + "/sub/deep.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0444u);
  ASSERT_EQ(lstat((root + "/link").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(st.st_mtime, 1);
  // Nothing temporary is left behind.
  for (auto& e : entries(state_ + "/store"))
    EXPECT_FALSE(e.starts_with(kStoreTempPrefix)) << e;
  EXPECT_THROW(store.addPath(in + "/dir", "bad name"), FormatError);
  EXPECT_THROW(store.addPath(in + "/missing"), SysError);
}

TEST_F(LocalStoreTest, ReferencesReferrersAndClosure) {
  LocalStore store(state_);
  auto a = store.addText("a", "leaf", {});
  auto b = store.addText("b", "uses " + store.printPath(a), {a});
  auto c = store.addText("c", "uses " + store.printPath(b), {b});
  auto d = store.addText("d", "alone", {});
  EXPECT_EQ(store.queryReferences(c), StorePathSet{b});
  EXPECT_EQ(store.queryReferrers(a), StorePathSet{b});
  EXPECT_TRUE(store.queryReferrers(c).empty());
  EXPECT_EQ(store.queryRequisites({c}), (StorePathSet{a, b, c}));
  EXPECT_EQ(store.queryRequisites({c, d}), (StorePathSet{a, b, c, d}));
  EXPECT_EQ(store.queryAllValidPaths(), (StorePathSet{a, b, c, d}));
  EXPECT_THROW(store.queryReferences(StorePath(std::string(32, 'z') + "-x")),
               InvalidPathError);
}

TEST_F(LocalStoreTest, DerivationOutputsDeriverSelfReferenceSigs) {
  LocalStore store(state_);
  auto drv = store.addText("x.drv", drvText(store.storeDir(), "x"), {});
  StorePath out(std::string(32, '1') + "-x");
  std::string contents = "I am " + store.printPath(out);
  auto nar = narOf(contents);
  auto info = infoFor(out, nar);
  info.references = {out};
  info.deriver = drv;
  info.ultimate = true;
  info.sigs = {"k1:AAAA", "k2:BBBB"};
  StringSource src(nar);
  store.addFromNar(info, src);
  store.registerDerivationOutputs(drv, {{"out", out}});
  auto got = store.requirePathInfo(out);
  EXPECT_EQ(got.references, StorePathSet{out});
  EXPECT_EQ(got.deriver, drv);
  EXPECT_TRUE(got.ultimate);
  EXPECT_EQ(got.sigs, info.sigs);
  EXPECT_EQ(store.queryReferrers(out), StorePathSet{out});
  auto outs = store.queryDerivationOutputs(drv);
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs.at("out"), out);
  EXPECT_THROW(store.registerDerivationOutputs(
                   StorePath(std::string(32, '2') + "-y.drv"), {}),
               InvalidPathError);
  // The registration survives reopening.
  LocalStore again(state_);
  EXPECT_EQ(again.requirePathInfo(out).sigs, info.sigs);
}

// A bad NAR must leave nothing: no registration, no file, no temporary.
class CorruptNarTest : public LocalStoreTest {
 protected:
  template <typename E>
  void expectRejected(const ValidPathInfo& info, std::string_view nar) {
    LocalStore store(state_);
    StringSource src(nar);
    EXPECT_THROW(store.addFromNar(info, src), E);
    EXPECT_FALSE(store.isValid(info.path));
    EXPECT_TRUE(entries(state_ + "/store").empty());
  }
  StorePath path_{std::string(32, '3') + "-data"};
  std::string nar_ = narOf(std::string(100000, 'x'));
  ValidPathInfo info_ = infoFor(path_, nar_);
};

TEST_F(CorruptNarTest, HashMismatch) {
  std::string bad = nar_;
  bad[5000] = 'y';
  expectRejected<HashMismatchError>(info_, bad);
}

TEST_F(CorruptNarTest, SizeMismatch) {
  info_.narSize += 8;
  expectRejected<HashMismatchError>(info_, nar_);
}

TEST_F(CorruptNarTest, Truncated) {
  expectRejected<FormatError>(info_, std::string_view(nar_).substr(0, 60000));
}

TEST_F(CorruptNarTest, TrailingGarbage) {
  expectRejected<FormatError>(info_, nar_ + "garbage!");
}

TEST_F(CorruptNarTest, MissingReference) {
  info_.references = {StorePath(std::string(32, '4') + "-absent")};
  expectRejected<InvalidPathError>(info_, nar_);
  // The same NAR with correct metadata is then accepted.
  LocalStore store(state_);
  StringSource again(nar_);
  store.addFromNar(infoFor(path_, nar_), again);
  EXPECT_TRUE(store.isValid(path_));
}

// Without content sync (kiln build's stores, Nix's default) an add skips
// only the fsyncs: every check stays, the path is canonical and valid,
// and batches of any kind commit.
TEST_F(CorruptNarTest, WithoutContentSyncChecksStayAndAddsRegister) {
  LocalStore store(state_);
  EXPECT_EQ(store.contentSync(), LocalStore::ContentSync::kDurable);
  store.setContentSync(LocalStore::ContentSync::kNone);
  std::string bad = nar_;
  bad[5000] = 'y';
  StringSource badSrc(bad);
  EXPECT_THROW(store.addFromNar(info_, badSrc), HashMismatchError);
  EXPECT_TRUE(entries(state_ + "/store").empty());
  StringSource good(nar_);
  store.addFromNar(info_, good);
  EXPECT_TRUE(store.isValid(path_));
  struct stat st;
  ASSERT_EQ(lstat(store.physicalPath(path_).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0444u);
  EXPECT_EQ(st.st_mtime, 1);
  LocalStore::Batch batch(store, LocalStore::Batch::Sync::kFileSystem);
  auto t = batch.addText("t.txt", "hello", {});
  batch.commit();
  EXPECT_EQ(readFile(store.physicalPath(t)), "hello");
  EXPECT_TRUE(LocalStore(state_).isValid(t));
}

TEST_F(LocalStoreTest, LeftoverUnregisteredTreeIsReplaced) {
  LocalStore store(state_);
  StorePath p = store.storeDir().makeTextPath(
      "t.txt", hashString(HashAlgo::kSha256, "hello"), {});
  // An add that died after its rename but before registering.
  writeFile(store.physicalPath(p), "half");
  EXPECT_EQ(store.addText("t.txt", "hello", {}), p);
  EXPECT_EQ(readFile(store.physicalPath(p)), "hello");
}

TEST_F(LocalStoreTest, OtherLogicalStoreDirIsRefused) {
  { LocalStore store(state_); }
  EXPECT_THROW(LocalStore(state_, StoreDir("/other/store")), Error);
  LocalStore other(dir_.path() + "/other", StoreDir("/other/store"));
  auto p = other.addText("t.txt", "hello", {});
  EXPECT_EQ(other.printPath(p).rfind("/other/store/", 0), 0u);
  EXPECT_NE(p.baseName(), "9p0nl625gm5mli8h2xfsgma0zz31g9yc-t.txt");
}

}  // namespace
}  // namespace kiln::store::testing
