// The worker's journal of direct uploads (worker/src/upload_journal.h):
// what a restarted worker reads back, what it refuses to trust, and which
// parts of a resumed multipart upload it skips (direct_upload.h).
#include "upload_journal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <utime.h>

#include "direct_upload.h"
#include "kiln/common/file.h"

namespace kiln::worker {
namespace {

namespace proto = protocol;
using std::chrono::hours;
using std::chrono::system_clock;

const store::StoreDir kDir;
const store::StorePath kOut("00000000000000000000000000000000-out");

proto::StepResult built(uint64_t step) {
  proto::StepResult r;
  r.stepId = step;
  r.startTimeMs = 1;
  r.stopTimeMs = 2;
  proto::PathInfo info;
  info.path = kOut;
  info.narHash = hashString(HashAlgo::kSha256, "nar");
  info.narSize = 3;
  r.outputs.push_back({"out", info});
  return r;
}

proto::StageGrant grant(uint64_t step) {
  proto::StageGrant g;
  g.stepId = step;
  g.outputName = "out";
  g.key = "staging/" + std::to_string(step) + "/1/out.nar.zst";
  g.compression = "zstd";
  g.uploadId = "2~abc";
  g.partSize = 5 << 20;
  g.urls = {"http://127.0.0.1:1/a?partNumber=1",
            "http://127.0.0.1:1/a?partNumber=2",
            "http://127.0.0.1:1/a?partNumber=3"};
  return g;
}

proto::OutputStaged progress(uint64_t step, std::vector<std::string> etags) {
  return {step,
          "out",
          grant(step).key,
          "zstd",
          built(step).outputs[0].info,
          hashString(HashAlgo::kSha256, "object"),
          12u << 20,
          etags};
}

class UploadJournalTest : public ::testing::Test {
 protected:
  std::map<uint64_t, JournaledStep> load() {
    return journal_.load(kDir, hours(24), system_clock::now());
  }
  TempDir dir_{"kiln-journal"};
  UploadJournal journal_{dir_.path() + "/direct"};
};

TEST_F(UploadJournalTest, AStepReadsBackAsWritten) {
  journal_.beginStep(7,
                     kDir.printPath(store::StorePath(
                         "00000000000000000000000000000000-x.drv")),
                     built(7));
  journal_.recordGrant(grant(7), false);
  journal_.recordProgress(progress(7, {"\"e1\""}), false);
  auto steps = load();
  ASSERT_EQ(steps.count(7), 1u);
  auto& s = steps.at(7);
  EXPECT_EQ(s.drvPath.name(), "x.drv");
  EXPECT_EQ(s.result, built(7));
  ASSERT_EQ(s.outputs.count("out"), 1u);
  auto& o = s.outputs.at("out");
  EXPECT_FALSE(o.complete);
  EXPECT_EQ(o.grant.uploadId, "2~abc");
  EXPECT_EQ(o.grant.urls.size(), 1u) << "URLs expire: one is kept";
  ASSERT_TRUE(o.progress);
  EXPECT_EQ(o.progress->etags, std::vector<std::string>{"\"e1\""});
  // Complete: the OutputStaged to announce again.
  journal_.recordProgress(progress(7, {"\"e1\"", "\"e2\"", "\"e3\""}), true);
  EXPECT_TRUE(load().at(7).outputs.at("out").complete);
  journal_.forget(7);
  EXPECT_TRUE(load().empty());
}

TEST_F(UploadJournalTest, WhatDoesNotDecodeOrIsStaleIsRemoved) {
  journal_.beginStep(7, kDir.printPath(kOut), built(7));
  journal_.beginStep(8, kDir.printPath(kOut), built(8));
  journal_.beginStep(9, kDir.printPath(kOut), built(9));
  std::string d = dir_.path() + "/direct";
  // A truncated result: the step goes.
  std::string r = readFile(d + "/8/result");
  writeFile(d + "/8/result", r.substr(0, r.size() - 3));
  // A result older than the journal keeps.
  struct utimbuf old {
    0, 0
  };
  ASSERT_EQ(::utime((d + "/9/result").c_str(), &old), 0);
  // Another step's records under this one's name.
  journal_.recordGrant(grant(7), false);
  auto foreign = grant(7);
  foreign.outputName = "dev";
  journal_.recordGrant(foreign, false);
  ::rename((d + "/7/dev.grant").c_str(), (d + "/7/out.grant").c_str());
  writeFile(d + "/stray", "x");
  auto steps = load();
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_TRUE(steps.at(7).outputs.empty()) << "a foreign grant was trusted";
  EXPECT_FALSE(pathExists(d + "/8"));
  EXPECT_FALSE(pathExists(d + "/9"));
  EXPECT_FALSE(pathExists(d + "/stray"));
}

TEST(ReusableParts, OnlyPartsTheStoreHoldsAsJournaled) {
  auto before = grant(7);
  auto now = grant(7);
  uint64_t size = 12u << 20;  // parts of 5, 5 and 2 MiB
  now.uploadedParts = {{1, "\"e1\"", 5u << 20},
                       {2, "\"other\"", 5u << 20},  // not the journaled one
                       {3, "\"e3\"", 1u << 20}};    // not its size
  auto reuse = reusableParts(before, {"\"e1\"", "\"e2\"", "\"e3\""}, size, now);
  EXPECT_EQ(reuse, (std::vector<std::string>{"\"e1\"", "", ""}));
  now.uploadId = "2~another";  // a new upload: everything goes up
  EXPECT_TRUE(reusableParts(before, {"\"e1\""}, size, now).empty());
  now = grant(7);
  now.partSize = 6 << 20;
  now.uploadedParts = {{1, "\"e1\"", 5u << 20}};
  EXPECT_TRUE(reusableParts(before, {"\"e1\""}, size, now).empty());
}

}  // namespace
}  // namespace kiln::worker
