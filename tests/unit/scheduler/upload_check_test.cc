// What the scheduler verifies in a worker's upload before registering it
// (docs/operations.md, "What the farm trusts a worker with"): a fixed
// output's content against the hash its derivation declares, for every
// hash type and both methods Nix 2.8 allows, recorded as `ca`; a worker
// uploading other content fails the step with both hashes in its log and
// nothing registered.
#include <gtest/gtest.h>

#include "kiln/scheduler/logs.h"
#include "kiln/store/content_address.h"
#include "memory_service.h"

namespace kiln::scheduler {
namespace {

using testing::FakeWorker;
using testing::makeDrv;

// A flat or recursive fixed output over the single file "contents".
struct Fixed {
  HashAlgo algo;
  bool recursive;
};

std::string label(const Fixed& f) {
  return std::string(f.recursive ? "r:" : "") +
         std::string(hashAlgoName(f.algo));
}

class UploadCheckTest : public testing::MemoryServiceTest,
                        public ::testing::WithParamInterface<Fixed> {
 protected:
  // The hash a fixed output over a file holding `contents` declares.
  static Hash declared(const Fixed& f, const std::string& contents) {
    return hashString(f.algo,
                      f.recursive ? testing::outputNar(contents) : contents);
  }

  // A fixed-output derivation whose output is a file holding `contents`.
  std::string fixedDrv(const Fixed& f, const std::string& contents) {
    store::LocalStore store(state_);
    store::DerivationOutput out;
    out.hashAlgo = label(f);
    out.hash = declared(f, contents).toHex();
    return makeDrv(store, "fetched", {}, "x86_64-linux", {}, out);
  }

  // Builds `drv` on a new worker that uploads a file holding `uploaded`;
  // returns the finished build.
  BuildRow buildWith(const std::string& drv, const std::string& uploaded) {
    int64_t id = svc_->addBuild(jobset_, "fetched", drv);
    auto w = join("w1");
    EXPECT_TRUE(until({w.get()}, [&] { return w->steps.size() == 1; }));
    if (w->steps.empty()) return build(id);
    buildLast(*w, uploaded);
    EXPECT_TRUE(until({w.get()}, [&] { return build(id).finished; }));
    return build(id);
  }
};

TEST_P(UploadCheckTest, ARightFixedOutputIsRegisteredWithItsCa) {
  const Fixed& f = GetParam();
  std::string drv = fixedDrv(f, "source tarball\n");
  EXPECT_EQ(buildWith(drv, "source tarball\n").status, 0);
  store::LocalStore store(state_);
  auto info = store.queryPathInfo(testing::outPath(store, drv));
  ASSERT_TRUE(info);
  // As Nix records it: fixed:[r:]<algo>:<nix32>.
  EXPECT_EQ(info->ca,
            "fixed:" + label(f) + ":" +
                declared(f, "source tarball\n").to(HashFormat::kNix32, false));
  EXPECT_TRUE(info->references.empty());
}

TEST_P(UploadCheckTest, AWrongFixedOutputFailsTheStepWithBothHashes) {
  const Fixed& f = GetParam();
  std::string drv = fixedDrv(f, "source tarball\n");
  EXPECT_EQ(buildWith(drv, "rogue tarball\n").status,
            static_cast<int>(StepStatus::kFailed));
  std::string wanted = declared(f, "source tarball\n").to(HashFormat::kSri);
  std::string got = declared(f, "rogue tarball\n").to(HashFormat::kSri);
  auto step = svc_->db().stepByDrv(drv);
  ASSERT_TRUE(step);
  EXPECT_NE(step->error.find(wanted), std::string::npos) << step->error;
  EXPECT_NE(step->error.find(got), std::string::npos) << step->error;
  std::string log = readFile(stepLogPath(state_, drv, 1));
  EXPECT_NE(log.find(wanted), std::string::npos) << log;
  EXPECT_NE(log.find(got), std::string::npos) << log;
  store::LocalStore store(state_);
  EXPECT_FALSE(store.isValid(testing::outPath(store, drv)));
}

INSTANTIATE_TEST_SUITE_P(EveryNix28HashType, UploadCheckTest,
                         ::testing::Values(Fixed{HashAlgo::kMd5, false},
                                           Fixed{HashAlgo::kSha1, false},
                                           Fixed{HashAlgo::kSha256, false},
                                           Fixed{HashAlgo::kSha512, false},
                                           Fixed{HashAlgo::kMd5, true},
                                           Fixed{HashAlgo::kSha1, true},
                                           Fixed{HashAlgo::kSha256, true},
                                           Fixed{HashAlgo::kSha512, true}),
                         [](const ::testing::TestParamInfo<Fixed>& i) {
                           return std::string(i.param.recursive ? "recursive_"
                                                                : "flat_") +
                                  std::string(hashAlgoName(i.param.algo));
                         });

}  // namespace
}  // namespace kiln::scheduler
