// LocalStoreWriter: adds are queued and committed in batches, and a store
// path the evaluation reads is committed first.
#include <gtest/gtest.h>

#include "eval_test_util.h"
#include "kiln/common/file.h"
#include "kiln/evaluator/local_store_writer.h"

namespace kiln::eval::testing {
namespace {

class LocalStoreWriterTest : public ::testing::Test {
 protected:
  TempDir dir_{"kiln-lsw"};
  std::string state_ = dir_.path() + "/state";
  // The logical store directory is the physical one, so the evaluator can
  // read what it wrote at the path it computed.
  store::StoreDir storeDir_{state_ + "/store"};
  store::LocalStore store_{state_, storeDir_};
  int commits_ = 0;
  LocalStoreWriter writer_{store_, 3, [this] { ++commits_; }};
  EvalState st_{[this] {
    EvalSettings s;
    s.storeDir = storeDir_.dir();
    return s;
  }()};
  void SetUp() override { st_.setStoreWriter(&writer_); }
};

TEST_F(LocalStoreWriterTest, CommitsFullBatchesAndKeepsTheRestQueued) {
  evalStrict(st_, R"(map (i: builtins.toFile "f${toString i}" "text ${toString i}") [1 2 3 4 5 6 7])");
  EXPECT_EQ(commits_, 2);
  EXPECT_EQ(writer_.queued(), 1u);
  EXPECT_EQ(writer_.written(), 7u);
  EXPECT_EQ(store_.queryAllValidPaths().size(), 6u);
  writer_.flush();
  EXPECT_EQ(commits_, 3);
  EXPECT_EQ(writer_.queued(), 0u);
  EXPECT_EQ(store_.queryAllValidPaths().size(), 7u);
  writer_.flush();  // nothing queued: no commit
  EXPECT_EQ(commits_, 3);
  // Adding them again writes nothing.
  evalStrict(st_, R"(map (i: builtins.toFile "f${toString i}" "text ${toString i}") [1 2 3 4 5 6 7])");
  EXPECT_EQ(writer_.queued(), 0u);
  EXPECT_EQ(writer_.written(), 7u);
}

TEST_F(LocalStoreWriterTest, ReadingAQueuedStorePathCommitsItFirst) {
  EXPECT_EQ(evalStrict(st_, R"(builtins.readFile (builtins.toFile "r" "read me"))"),
            "\"read me\"");
  EXPECT_EQ(commits_, 1);
  EXPECT_EQ(writer_.queued(), 0u);
  EXPECT_EQ(evalStrict(st_, R"(builtins.pathExists (builtins.toFile "p" "here"))"), "true");
  EXPECT_EQ(store_.queryAllValidPaths().size(), 2u);
  // A path outside the store directory commits nothing.
  evalStrict(st_, R"(builtins.seq (builtins.toFile "q" "queued") (builtins.pathExists /tmp))");
  EXPECT_EQ(writer_.queued(), 1u);
}

}  // namespace
}  // namespace kiln::eval::testing
