// Garbage collection and verification of the local store.
#include <fcntl.h>

#include <cstring>
#include <optional>

#include "kiln/common/file_lock.h"
#include "local_store_fixture.h"

namespace kiln::store::testing {
namespace {

size_t indexOf(const std::vector<StorePath>& v, const StorePath& p) {
  return static_cast<size_t>(std::find(v.begin(), v.end(), p) - v.begin());
}

TEST_F(LocalStoreTest, GcKeepsRootClosuresAndDeletesReferrersFirst) {
  std::optional<LocalStore> adder(std::in_place, state_);
  LocalStore& store = *adder;
  auto a = store.addText("a", "leaf", {});
  auto b = store.addText("b", "b", {a});
  auto c = store.addText("c", "c", {b});
  auto d = store.addText("d", "d", {});
  auto f = store.addText("f", std::string(5000, 'f'), {});
  auto g = store.addText("g", "g", {f});
  store.addRoot("c", c);
  // An indirect root: gcroots/auto/r → <dir>/result → d's logical path.
  ASSERT_EQ(symlink(store.printPath(d).c_str(), (dir_.path() + "/result").c_str()), 0);
  createDirs(state_ + "/gcroots/auto");
  ASSERT_EQ(symlink((dir_.path() + "/result").c_str(),
                    (state_ + "/gcroots/auto/r").c_str()), 0);
  auto roots = store.findRoots();
  EXPECT_EQ(roots.size(), 2u);
  EXPECT_EQ(roots.at(state_ + "/gcroots/auto/r"), d);

  // This store object's own temporary roots cover everything it added, so
  // collect from a second one.
  LocalStore collector(state_);
  auto dry = collector.collectGarbage(true);
  ASSERT_EQ(dry.deleted.size(), 0u) << "temp roots of a live store object";
  adder.reset();
  dry = collector.collectGarbage(true);
  ASSERT_EQ(dry.deleted.size(), 2u);
  EXPECT_LT(indexOf(dry.deleted, g), indexOf(dry.deleted, f));
  EXPECT_GE(dry.bytesFreed, 5000u);
  EXPECT_TRUE(collector.isValid(f));
  EXPECT_TRUE(pathExists(collector.physicalPath(f)));

  auto res = collector.collectGarbage();
  EXPECT_EQ(res.deleted, dry.deleted);
  EXPECT_EQ(res.bytesFreed, dry.bytesFreed);
  for (auto& p : {f, g}) {
    EXPECT_FALSE(collector.isValid(p));
    EXPECT_FALSE(pathExists(collector.physicalPath(p)));
  }
  for (auto& p : {a, b, c, d}) EXPECT_TRUE(collector.isValid(p));
  // Removing the indirect root's target frees d.
  unlink((dir_.path() + "/result").c_str());
  EXPECT_EQ(collector.collectGarbage().deleted, std::vector<StorePath>{d});
}

TEST_F(LocalStoreTest, GcHonoursTempRootsOfLiveProcessesOnly) {
  int ready[2], go[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(go), 0);
  pid_t child = forkChild([&] {
    LocalStore store(state_);
    store.addText("held", "held by a live process", {});
    char c = 'r';
    if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) return 2;
    return 0;  // exits without cleaning up, like a crash
  });
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  LocalStore store(state_);
  auto held = *store.queryAllValidPaths().begin();
  EXPECT_TRUE(store.collectGarbage().deleted.empty());
  EXPECT_TRUE(store.isValid(held));
  ASSERT_EQ(write(go[1], "g", 1), 1);
  EXPECT_EQ(waitChild(child), 0);
  // The owner is gone: its roots file is stale and the path is garbage.
  EXPECT_EQ(store.collectGarbage().deleted, std::vector<StorePath>{held});
  EXPECT_TRUE(entries(state_ + "/temproots").size() <= 1u);
}

// A Source that stops half-way and waits until the test lets it go on, so
// that an add can be observed in progress.
class PausingSource : public Source {
 public:
  PausingSource(std::string data, int readyFd, int goFd)
      : data_(std::move(data)), ready_(readyFd), go_(goFd) {}
  size_t read(char* out, size_t len) override {
    if (pos_ >= data_.size() / 2 && !paused_) {
      paused_ = true;
      char c = 'r';
      if (::write(ready_, &c, 1) != 1 || ::read(go_, &c, 1) != 1)
        throw Error("pause pipe failed");
    }
    size_t n = std::min(len, data_.size() - pos_);
    std::memcpy(out, data_.data() + pos_, n);
    pos_ += n;
    return n;
  }

 private:
  std::string data_;
  size_t pos_ = 0;
  bool paused_ = false;
  int ready_, go_;
};

TEST_F(LocalStoreTest, GcLeavesPathsBeingAddedAndTheirReferences) {
  StorePath dep(std::string(32, '5') + "-dep");
  StorePath big(std::string(32, '6') + "-big");
  std::string depNar = narOf("dependency");
  std::string bigNar = narOf(std::string(1 << 20, 'b'));
  {
    LocalStore store(state_);
    StringSource src(depNar);
    store.addFromNar(infoFor(dep, depNar), src);
  }  // dep is now unrooted garbage
  int ready[2], go[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(go), 0);
  pid_t child = forkChild([&] {
    LocalStore store(state_);
    auto info = infoFor(big, bigNar);
    info.references = {dep};
    PausingSource src(bigNar, ready[1], go[0]);
    store.addFromNar(info, src);
    return store.isValid(big) ? 0 : 3;
  });
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  LocalStore store(state_);
  auto temps = entries(state_ + "/store");
  ASSERT_EQ(std::count_if(temps.begin(), temps.end(),
                          [](auto& e) { return e.starts_with(kStoreTempPrefix); }),
            1);
  auto res = store.collectGarbage();
  EXPECT_TRUE(res.deleted.empty());
  EXPECT_EQ(res.junkRemoved, 0u);
  EXPECT_EQ(entries(state_ + "/store").size(), temps.size());
  ASSERT_EQ(write(go[1], "g", 1), 1);
  EXPECT_EQ(waitChild(child), 0);
  EXPECT_TRUE(store.isValid(big));
  EXPECT_EQ(store.queryReferences(big), StorePathSet{dep});
  EXPECT_TRUE(store.verify().problems.empty());
}

TEST_F(LocalStoreTest, GcRemovesStaleTemporariesAndUnregisteredTrees) {
  LocalStore store(state_);
  std::string base = std::string(32, '7') + "-x";
  createDirs(state_ + "/store/" + std::string(kStoreTempPrefix) + "999999-0-" + base + "/d");
  writeFile(state_ + "/store/" + std::string(32, '8') + "-unregistered", "junk");
  writeFile(state_ + "/store/not-a-store-path", "left alone");
  auto dry = store.collectGarbage(true);
  EXPECT_EQ(dry.junkRemoved, 2u);
  EXPECT_EQ(entries(state_ + "/store").size(), 3u);
  auto res = store.collectGarbage();
  EXPECT_EQ(res.junkRemoved, 2u);
  EXPECT_EQ(entries(state_ + "/store"), std::vector<std::string>{"not-a-store-path"});
}

TEST_F(LocalStoreTest, VerifyFindsCorruptionAndMissingFiles) {
  LocalStore store(state_);
  auto in = makeInputs();
  auto tree = store.addPath(in + "/dir");
  auto lone = store.addText("lone", "lonely", {});
  auto base = store.addText("base", "base", {});
  auto user = store.addText("user", "user", {base});
  auto ok = store.verify();
  EXPECT_EQ(ok.checked, 4u);
  EXPECT_TRUE(ok.problems.empty());

  std::string victim = store.physicalPath(tree) + "/sub/deep.txt";
  chmod(victim.c_str(), 0644);
  writeFile(victim, "tampered\n");
  deletePath(store.physicalPath(lone));
  deletePath(store.physicalPath(base));
  auto res = store.verify();
  ASSERT_EQ(res.problems.size(), 3u);
  std::map<StorePath, VerifyProblem> byPath;
  for (auto& p : res.problems) byPath.emplace(p.path, p);
  EXPECT_EQ(byPath.at(tree).kind, VerifyProblem::Kind::kHashMismatch);
  EXPECT_EQ(byPath.at(lone).kind, VerifyProblem::Kind::kMissing);
  EXPECT_EQ(byPath.at(base).kind, VerifyProblem::Kind::kMissing);
  EXPECT_TRUE(store.isValid(lone));  // without repair nothing changes

  auto repaired = store.verify(true);
  ASSERT_EQ(repaired.problems.size(), 3u);
  for (auto& p : repaired.problems)
    EXPECT_EQ(p.repaired, p.path == lone) << p.path.baseName() << ": " << p.detail;
  EXPECT_FALSE(store.isValid(lone));
  EXPECT_TRUE(store.isValid(base));  // user still refers to it
  EXPECT_TRUE(store.isValid(user));
}

}  // namespace
}  // namespace kiln::store::testing
