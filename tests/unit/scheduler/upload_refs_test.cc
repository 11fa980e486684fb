// The references the scheduler registers for an upload (docs/operations.md,
// "What the farm trusts a worker with"): what it scans in the NAR as it
// arrives, among the step's input closure and its own outputs, whatever the
// worker reports; a report that disagrees is logged and counted in
// kiln_upload_reference_mismatches_total.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "farm.h"
#include "memory_service.h"

namespace kiln::scheduler {
namespace {

using testing::FakeWorker;
using testing::makeDrv;
using testing::outPath;

class UploadRefsTest : public testing::MemoryServiceTest {
 protected:
  void SetUp() override {
    MemoryServiceTest::SetUp();
    // a is built; c is valid but no input of b (a foreign path).
    store::LocalStore store(state_);
    testing::makeOutputValid(store, a_);
    c_ = makeDrv(store, "c");
    testing::makeOutputValid(store, c_);
    aOut_ = outPath(store, a_);
    bOut_ = outPath(store, b_);
    cOut_ = outPath(store, c_);
  }

  // Builds b on a worker that uploads a file holding `contents` and reports
  // `reported` as its references; returns what the store registered.
  store::StorePathSet buildB(const std::string& contents,
                             const store::StorePathSet& reported) {
    int64_t id = svc_->addBuild(jobset_, "b", b_);
    auto w = join("w1");
    EXPECT_TRUE(until({w.get()}, [&] { return w->steps.size() == 1; }));
    if (w->steps.empty()) return {};
    w->reportReferences = reported;
    buildLast(*w, contents);
    EXPECT_TRUE(until({w.get()}, [&] { return build(id).finished; }));
    EXPECT_EQ(build(id).status, 0);
    store::LocalStore store(state_);
    auto info = store.queryPathInfo(bOut_);
    EXPECT_TRUE(info);
    return info ? info->references : store::StorePathSet{};
  }

  double mismatches() {
    auto text = prometheus::TextSerializer().Serialize(
        svc_->metricsRegistry()->Collect());
    return test::prometheusSample(text,
                                  "kiln_upload_reference_mismatches_total")
        .value_or(-1);
  }

  std::string print(const store::StorePath& p) {
    return "/nix/store/" + p.baseName();
  }

  std::string c_;
  store::StorePath aOut_{"00000000000000000000000000000000-x"};
  store::StorePath bOut_ = aOut_, cOut_ = aOut_;
};

TEST_F(UploadRefsTest, AnHonestReportIsRegisteredAndNotCounted) {
  auto refs = buildB("uses " + print(aOut_) + " and " + print(bOut_) + "\n",
                     {aOut_, bOut_});
  EXPECT_EQ(refs, (store::StorePathSet{aOut_, bOut_}));
  EXPECT_EQ(mismatches(), 0);
}

TEST_F(UploadRefsTest, AReportWithFewerReferencesGetsTheScannedOnes) {
  // Hiding a dependency would let the collector delete it under b.
  auto refs = buildB("uses " + print(aOut_) + "\n", {});
  EXPECT_EQ(refs, store::StorePathSet{aOut_});
  EXPECT_EQ(mismatches(), 1);
}

TEST_F(UploadRefsTest, AReportWithExtraReferencesGetsOnlyTheScannedOnes) {
  auto refs = buildB("refers to nothing\n", {aOut_});
  EXPECT_TRUE(refs.empty());
  EXPECT_EQ(mismatches(), 1);
}

TEST_F(UploadRefsTest, AForeignReferenceIsNeitherScannedNorRegistered) {
  // c's output is valid, and its hash part is in the NAR, but it is not in
  // b's input closure: b cannot have seen it, so it is no reference.
  auto refs = buildB("mentions " + print(cOut_) + "\n", {cOut_});
  EXPECT_TRUE(refs.empty());
  EXPECT_EQ(mismatches(), 1);
}

}  // namespace
}  // namespace kiln::scheduler
