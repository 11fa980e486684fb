// Ingestion re-derives each `.drv`'s outputs from its contents with the
// store's own check (readCheckedDrv → store::checkDerivationFile): a
// forged `.drv` already in the central store (registered before the
// store's check existed, or behind its back) that claims another
// derivation's output gets no step, and its build fails naming the output.
#include <gtest/gtest.h>

#include "kiln/common/sqlite.h"
#include "kiln/scheduler/ingest.h"
#include "memory_service.h"

namespace kiln::scheduler {
namespace {

using testing::makeDrv;
using testing::outPath;

// Registers `drv` (named `name`.drv, without inputs) in the store of
// `stateDir` the way no kiln store would: file and row written directly,
// without the check.
std::string plantUnchecked(const std::string& stateDir, const std::string& name,
                           const store::Derivation& drv) {
  store::LocalStore store(stateDir);
  const auto& sd = store.storeDir();
  std::string text = store::printDerivation(sd, drv);
  auto path =
      sd.makeTextPath(name + ".drv", hashString(HashAlgo::kSha256, text), {});
  writeFile(store.physicalPath(path), text);
  std::string nar = testing::outputNar(text);
  SqliteDb db(stateDir + "/db/db.sqlite");
  db.prepare(
        "insert into ValidPaths (path, hash, registrationTime, narSize) "
        "values (?, ?, 1, ?)")
      .bind(sd.printPath(path))
      .bind("sha256:" + hashString(HashAlgo::kSha256, nar).toHex())
      .bind(static_cast<int64_t>(nar.size()))
      .exec();
  return sd.printPath(path);
}

// A derivation "evil" whose output claims `claimed` (another derivation's).
store::Derivation claiming(const store::StorePath& claimed) {
  store::Derivation d;
  d.name = "evil";
  d.outputs["out"].path = claimed;
  d.platform = "x86_64-linux";
  d.builder = "/bin/sh";
  d.env = {{"name", "evil"},
           {"system", "x86_64-linux"},
           {"builder", "/bin/sh"},
           {"out", "/nix/store/" + claimed.baseName()}};
  return d;
}

class IngestCheckTest : public testing::MemoryServiceTest {
 protected:
  void SetUp() override {
    MemoryServiceTest::SetUp();
    store::LocalStore store(state_);
    aOut_ = outPath(store, a_);
    aOutPrinted_ = store.printPath(aOut_);
  }

  // The finished build of `drv`, added as job "evil".
  BuildRow buildOf(const std::string& drv) {
    int64_t id = svc_->addBuild(jobset_, "evil", drv);
    EXPECT_TRUE(until({}, [&] { return build(id).finished; }));
    return build(id);
  }

  void expectRefused(const BuildRow& b, const std::string& forged) {
    EXPECT_EQ(b.status, static_cast<int>(StepStatus::kAborted));
    EXPECT_NE(b.error.find("derivation '" + forged +
                           "' has incorrect output 'out' '" + aOutPrinted_ +
                           "', should be '/nix/store/"),
              std::string::npos)
        << b.error;
    EXPECT_FALSE(svc_->db().stepByDrv(forged)) << "a step was made";
  }

  store::StorePath aOut_{"00000000000000000000000000000000-x"};
  std::string aOutPrinted_;
};

TEST_F(IngestCheckTest, AForgedDrvClaimingAnUnbuiltOutputGetsNoStep) {
  std::string forged = plantUnchecked(state_, "evil", claiming(aOut_));
  expectRefused(buildOf(forged), forged);
}

TEST_F(IngestCheckTest, AForgedDrvClaimingABuiltOutputIsNotTakenAsBuilt) {
  // Checked before its outputs are looked up: a's output being valid must
  // not make the forged build a success.
  {
    store::LocalStore store(state_);
    testing::makeOutputValid(store, a_);
  }
  std::string forged = plantUnchecked(state_, "evil", claiming(aOut_));
  expectRefused(buildOf(forged), forged);
}

TEST_F(IngestCheckTest, AForgedDrvDeepInAClosureFailsTheBuildNamingIt) {
  std::string forged = plantUnchecked(state_, "evil", claiming(aOut_));
  std::string top;
  {
    // The store hashes the forged input without checking it: that is the
    // input's own registration's business.
    store::LocalStore store(state_);
    top = makeDrv(store, "top", {forged});
  }
  expectRefused(buildOf(top), forged);
}

TEST_F(IngestCheckTest, PrefetchLeavesAForgedDrvForIngestionToRefuse) {
  std::string forged = plantUnchecked(state_, "evil", claiming(aOut_));
  store::LocalStore store(state_);
  auto map = prefetchDrvs(store, {forged, b_});
  EXPECT_FALSE(map->count(forged));
  EXPECT_TRUE(map->count(b_) && map->count(a_));
  store::DrvHashCache cache(
      store.storeDir(),
      store::fileDrvLoader(store.storeDir(), store.physicalRoot()));
  EXPECT_THROW(readCheckedDrv(store, cache, store.parsePath(forged)),
               FormatError);
  EXPECT_EQ(readCheckedDrv(store, cache, store.parsePath(b_)).name, "b");
}

}  // namespace
}  // namespace kiln::scheduler
