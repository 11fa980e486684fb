// LocalStore::Batch: queued adds become valid together, failures leave
// nothing behind, and concurrent adders and collectors stay correct.
#include <sys/stat.h>

#include <algorithm>
#include <memory>

#include "local_store_fixture.h"

namespace kiln::store::testing {
namespace {

using Batch = LocalStore::Batch;

struct stat statOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st;
}

class LocalStoreBatchTest : public LocalStoreTest {
 protected:
  /// Temporaries in the physical root.
  size_t temps() const {
    auto es = entries(state_ + "/store");
    return std::count_if(es.begin(), es.end(),
                         [](auto& e) { return e.starts_with(kStoreTempPrefix); });
  }
};

TEST_F(LocalStoreBatchTest, ReferencesInsideTheBatchAndOutputs) {
  LocalStore store(state_);
  StorePath out(std::string(32, 'a') + "-out");
  auto batch = std::make_unique<Batch>(store);
  auto a = batch->addText("a", "first", {});
  auto b = batch->addText("b", "second " + store.printPath(a), {a});
  auto drv = batch->addText("c.drv", drvText(store.storeDir(), "c", {a, b}),
                            {a, b});
  {
    batch->registerDerivationOutputs(drv, {{"out", out}});
    EXPECT_EQ(batch->size(), 3u);
    EXPECT_TRUE(batch->queued(b));
    // Queued is neither valid nor in place: only temporaries exist.
    EXPECT_FALSE(store.isValid(a));
    EXPECT_FALSE(pathExists(store.physicalPath(b)));
    EXPECT_EQ(temps(), 3u);
    batch->commit();
    EXPECT_EQ(batch->size(), 0u);
    EXPECT_FALSE(batch->queued(b));
    batch.reset();
  }
  EXPECT_EQ(temps(), 0u);
  EXPECT_EQ(store.queryReferences(b), StorePathSet{a});
  EXPECT_EQ(store.queryReferences(drv), (StorePathSet{a, b}));
  EXPECT_EQ(store.queryDerivationOutputs(drv),
            (std::map<std::string, StorePath>{{"out", out}}));
  EXPECT_EQ(readFile(store.physicalPath(a)), "first");
  EXPECT_EQ(statOf(store.physicalPath(b)).st_mode & 07777, 0444u);
  EXPECT_EQ(store.requirePathInfo(a).ca, "text:" +
                                             hashString(HashAlgo::kSha256, "first").toNix32());
  // The same paths and metadata as single adds give.
  TempDir other("kiln-ls2");
  LocalStore single(other.path());
  EXPECT_EQ(single.addText("a", "first", {}), a);
  EXPECT_EQ(single.requirePathInfo(a).narHash, store.requirePathInfo(a).narHash);
  EXPECT_TRUE(store.verify().problems.empty());
}

// addVerifiedNar trusts the caller's NarHash (it computed it on these very
// bytes: the farm's verifier of a direct upload) and checks the size only.
TEST_F(LocalStoreBatchTest, AVerifiedNarIsNotHashedAgainButItsSizeIsChecked) {
  LocalStore store(state_);
  StorePath p(std::string(32, 'f') + "-verified");
  std::string nar = narOf("verified payload");
  auto info = infoFor(p, nar);
  auto claimed = info;
  claimed.narHash = hashString(HashAlgo::kSha256, "not hashed here");
  {
    Batch batch(store);
    auto shorter = claimed;
    shorter.narSize -= 1;
    StringSource bad(nar);
    EXPECT_THROW(batch.addVerifiedNar(shorter, bad), HashMismatchError);
    StringSource src(nar);
    batch.addVerifiedNar(claimed, src);
    batch.commit();
  }
  EXPECT_EQ(readFile(store.physicalPath(p)), "verified payload");
  EXPECT_EQ(store.requirePathInfo(p).narHash, claimed.narHash)
      << "the caller's hash is registered as given";
  EXPECT_EQ(temps(), 0u);
}

TEST_F(LocalStoreBatchTest, AFailedAddLeavesNothingAndTheRestCommits) {
  LocalStore store(state_);
  StorePath bad(std::string(32, 'b') + "-bad");
  StorePath orphan(std::string(32, 'c') + "-orphan");
  StorePath missing(std::string(32, 'd') + "-missing");
  Batch batch(store);
  auto a = batch.addText("a", "kept", {});
  std::string nar = narOf("payload");
  auto info = infoFor(bad, nar);
  info.narSize += 1;
  StringSource src(nar);
  EXPECT_THROW(batch.addFromNar(info, src), HashMismatchError);
  auto refInfo = infoFor(orphan, nar);
  refInfo.references = {missing};
  StringSource src2(nar);
  EXPECT_THROW(batch.addFromNar(refInfo, src2), InvalidPathError);
  EXPECT_EQ(batch.size(), 1u);
  EXPECT_FALSE(batch.queued(bad));
  EXPECT_EQ(temps(), 1u);
  batch.commit();
  EXPECT_TRUE(store.isValid(a));
  EXPECT_FALSE(store.isValid(bad));
  EXPECT_FALSE(store.isValid(orphan));
  EXPECT_EQ(temps(), 0u);
  EXPECT_EQ(entries(state_ + "/store"), std::vector<std::string>{a.baseName()});
}

TEST_F(LocalStoreBatchTest, UncommittedBatchRegistersNothing) {
  LocalStore store(state_);
  auto batch = std::make_unique<Batch>(store);
  auto a = batch->addText("a", "dropped", {});
  batch->addPath(makeInputs() + "/dir");
  EXPECT_EQ(temps(), 2u);
  batch.reset();
  EXPECT_EQ(temps(), 0u);
  EXPECT_FALSE(store.isValid(a));
  EXPECT_TRUE(store.queryAllValidPaths().empty());
  EXPECT_TRUE(entries(state_ + "/store").empty());
}

TEST_F(LocalStoreBatchTest, ValidPathsAreNotQueuedAndMayBeReferenced) {
  LocalStore store(state_);
  auto dep = store.addText("dep", "already here", {});
  Batch batch(store);
  EXPECT_EQ(batch.addText("dep", "already here", {}), dep);
  EXPECT_FALSE(batch.queued(dep));
  auto user = batch.addText("user", "uses dep", {dep});
  EXPECT_EQ(batch.addText("user", "uses dep", {dep}), user);  // queued once
  EXPECT_EQ(batch.size(), 1u);
  batch.commit();
  EXPECT_EQ(store.queryReferences(user), StorePathSet{dep});
  batch.commit();  // an empty commit does nothing
  EXPECT_EQ(store.queryAllValidPaths().size(), 2u);
}

// Outputs of a .drv that was valid before the batch are written in the
// batch's commit transaction (with an output built elsewhere, as the
// scheduler registers an upload), even when that output was valid already.
TEST_F(LocalStoreBatchTest, OutputsOfAValidDerivationCommitWithTheBatch) {
  LocalStore store(state_);
  auto dep = store.addText("dep", "dep", {});
  auto drv = store.addText("d.drv", drvText(store.storeDir(), "d", {dep}),
                           {dep});
  auto out = store.addText("out", "built", {});
  {
    Batch batch(store, Batch::Sync::kEachFile);
    batch.addText("out", "built", {});  // valid already: nothing queued
    batch.registerDerivationOutputs(drv, {{"out", out}});
    EXPECT_EQ(batch.size(), 0u);
    EXPECT_TRUE(store.queryDerivationOutputs(drv).empty());
  }  // dropped uncommitted: nothing written
  EXPECT_TRUE(store.queryDerivationOutputs(drv).empty());
  Batch batch(store, Batch::Sync::kEachFile);
  batch.registerDerivationOutputs(drv, {{"out", out}});
  batch.commit();
  EXPECT_EQ(store.queryDerivationOutputs(drv),
            (std::map<std::string, StorePath>{{"out", out}}));
  StorePath missing(std::string(32, 'b') + "-missing.drv");
  EXPECT_THROW(batch.registerDerivationOutputs(missing, {{"out", out}}),
               InvalidPathError);
}

TEST_F(LocalStoreBatchTest, APathAnotherAdderRegisteredFirstIsDiscarded) {
  LocalStore first(state_);
  LocalStore second(state_);
  Batch b1(first), b2(second);
  auto p = b1.addText("shared", "same bytes", {});
  EXPECT_EQ(b2.addText("shared", "same bytes", {}), p);
  auto own = b2.addText("own", "mine", {p});
  EXPECT_EQ(temps(), 3u);
  b1.commit();
  auto inode = statOf(first.physicalPath(p)).st_ino;
  b2.commit();  // finds `p` valid, keeps the registered copy
  EXPECT_EQ(statOf(first.physicalPath(p)).st_ino, inode);
  EXPECT_EQ(second.queryReferences(own), StorePathSet{p});
  EXPECT_EQ(temps(), 0u);
  EXPECT_TRUE(first.verify().problems.empty());
}

TEST_F(LocalStoreBatchTest, AFailedCommitRegistersNothingAndLeavesNoFiles) {
  LocalStore store(state_);
  auto dep = store.addText("dep", "will vanish", {});
  Batch batch(store);
  auto a = batch.addText("a", "independent", {});
  auto user = batch.addText("user", "uses dep", {dep});
  // The reference disappears between the add and the commit (its files
  // are lost and a repairing verify unregisters it), so registration fails.
  deletePath(store.physicalPath(dep));
  LocalStore other(state_);
  ASSERT_EQ(other.verify(true).problems.size(), 1u);
  EXPECT_THROW(batch.commit(), InvalidPathError);
  EXPECT_EQ(batch.size(), 0u);
  EXPECT_FALSE(store.isValid(a));
  EXPECT_FALSE(store.isValid(user));
  EXPECT_TRUE(entries(state_ + "/store").empty());
}

TEST_F(LocalStoreBatchTest, CollectorKeepsQueuedPathsTheirTempsAndReferences) {
  auto dep = std::make_unique<LocalStore>(state_)->addText("dep", "unrooted", {});
  // dep is now garbage: the store that added it (and its roots) is gone
  LocalStore store(state_);
  Batch batch(store);
  auto user = batch.addText("user", "uses dep", {dep});
  auto tree = batch.addPath(makeInputs() + "/dir");
  pid_t gc = forkChild([&] {
    LocalStore collector(state_);
    auto res = collector.collectGarbage();
    return res.deleted.empty() && res.junkRemoved == 0 ? 0 : 1;
  });
  ASSERT_EQ(waitChild(gc), 0);
  EXPECT_EQ(temps(), 2u);
  batch.commit();
  EXPECT_TRUE(store.isValid(user));
  EXPECT_TRUE(store.isValid(tree));
  EXPECT_EQ(store.queryReferences(user), StorePathSet{dep});
  EXPECT_TRUE(store.verify().problems.empty());
}

// Adders in several processes commit batches of shared and own paths (the
// shared ones race) while a collector runs; every committed path must be
// valid and intact, and the rooted chain survives.
int batchAdder(const std::string& state, int id, int rounds) {
  LocalStore store(state);
  StorePathSet prev;
  for (int i = 0; i < rounds; ++i) {
    Batch batch(store);
    std::vector<std::pair<StorePath, std::string>> added;
    for (int j = 0; j < 5; ++j) {
      std::string shared = "shared " + std::to_string(i) + "-" + std::to_string(j);
      auto s = batch.addText("shared-" + std::to_string(i * 5 + j), shared, prev);
      auto own = batch.addText("own-" + std::to_string(id), shared + " own", {s});
      added.push_back({s, shared});
      added.push_back({own, shared + " own"});
      prev = {s};
    }
    batch.commit();
    for (auto& [p, want] : added) {
      if (!store.isValid(p)) return 10;
      if (readFile(store.physicalPath(p)) != want) return 11;
    }
  }
  store.addRoot("batch-adder-" + std::to_string(id), *prev.begin());
  return 0;
}

TEST_F(LocalStoreBatchTest, ConcurrentBatchAddersAndCollector) {
  constexpr int kAdders = 3, kRounds = 6;
  runAddersAgainstCollector(state_, dir_.path() + "/stop", kAdders,
                            [&](int i) { return batchAdder(state_, i, kRounds); });
  LocalStore store(state_);
  auto roots = store.findRoots();
  ASSERT_EQ(roots.size(), static_cast<size_t>(kAdders));
  auto closure = store.queryRequisites({roots.begin()->second});
  EXPECT_EQ(closure.size(), static_cast<size_t>(kRounds * 5));
  store.collectGarbage();
  EXPECT_EQ(store.queryAllValidPaths(), closure);
  EXPECT_EQ(temps(), 0u);
  auto v = store.verify();
  EXPECT_TRUE(v.problems.empty()) << v.problems.front().detail;
}

}  // namespace
}  // namespace kiln::store::testing
