// Claims and results of evaluations run on evaluator hosts (eval_queue.h),
// on both backends: one claim per jobset until its lease ends, and a
// result's bytes read back exactly, chunk by chunk.
#include "kiln/scheduler/eval_queue.h"

#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "state_backends.h"

namespace kiln::scheduler {
namespace {

class EvalQueueTest : public ::testing::TestWithParam<test::StateBackend> {
 protected:
  TempDir dir_{"kiln-eval-queue"};
  StateDb db_{test::freshStateDatabase(GetParam(), dir_.path())};
};

TEST_P(EvalQueueTest, OneClaimPerJobsetUntilItsLeaseEnds) {
  EXPECT_TRUE(claimEvaluation(db_, {1, "e1", 42, true, 100, 1100}, 100));
  EXPECT_FALSE(claimEvaluation(db_, {1, "e2", std::nullopt, false, 200, 1200},
                               200));
  EXPECT_TRUE(claimEvaluation(db_, {2, "e2", std::nullopt, false, 200, 1200},
                              200));
  auto claims = evalClaims(db_);
  ASSERT_EQ(claims.size(), 2u);
  EXPECT_EQ(claims[0].evaluator, "e1");
  EXPECT_EQ(claims[0].request, 42);
  EXPECT_TRUE(claims[0].force);
  EXPECT_EQ(claims[1].request, std::nullopt);
  // Renewed by its holder only.
  EXPECT_TRUE(renewEvalClaim(db_, 1, "e1", 2000));
  EXPECT_FALSE(renewEvalClaim(db_, 1, "e2", 9000));
  EXPECT_FALSE(claimEvaluation(db_, {1, "e2", std::nullopt, false, 1500, 2500},
                               1500));
  // Past its lease it is anybody's; the old holder cannot renew it.
  EXPECT_TRUE(claimEvaluation(db_, {1, "e2", std::nullopt, false, 2001, 3001},
                              2001));
  EXPECT_FALSE(renewEvalClaim(db_, 1, "e1", 5000));
  releaseEvalClaim(db_, 1, "e1");  // not its claim: nothing happens
  EXPECT_EQ(evalClaims(db_).size(), 2u);
  releaseEvalClaim(db_, 1, "e2");
  releaseEvalClaim(db_, 2, "e2");
  EXPECT_TRUE(evalClaims(db_).empty());
}

TEST_P(EvalQueueTest, AResultReadsBackExactlyAcrossChunks) {
  std::string bytes;
  for (size_t i = 0; bytes.size() < kEvalChunkBytes * 2 + 123; ++i)
    bytes += static_cast<char>(i * 7 + (i >> 9));
  int64_t id;
  {
    StateDb::Transaction txn(db_);
    EvalResultWriter w(db_, {0, 3, 9, "e1", 500, 0, 0});
    w.write(bytes.substr(0, 10));
    w.write(bytes.substr(10));
    id = w.finish();
    txn.commit();
  }
  auto rows = evalResults(db_);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].id, id);
  EXPECT_EQ(rows[0].jobset, 3);
  EXPECT_EQ(rows[0].request, 9);
  EXPECT_EQ(rows[0].chunks, 3);
  EXPECT_EQ(rows[0].bytes, static_cast<int64_t>(bytes.size()));
  EvalResultReader r(db_, rows[0]);
  StringSink got;
  r.drainInto(got);
  EXPECT_TRUE(got.s == bytes);
  deleteEvalResult(db_, id);
  EXPECT_TRUE(evalResults(db_).empty());
  auto left = db_.db().prepare("SELECT count(*) FROM eval_result_chunks");
  ASSERT_TRUE(left.step());
  EXPECT_EQ(left.getInt(0), 0);
}

TEST_P(EvalQueueTest, AMissingOrLyingChunkIsAFormatError) {
  EvalResultRow row{0, 3, std::nullopt, "e1", 500, 2, 10};
  {
    StateDb::Transaction txn(db_);
    EvalResultWriter w(db_, row);
    w.write("0123456789");
    row.id = w.finish();
    txn.commit();
  }
  row.chunks = 2;  // one more than stored
  EvalResultReader missing(db_, row);
  StringSink sink;
  EXPECT_THROW(missing.drainInto(sink), FormatError);
  row.chunks = 1;
  row.bytes = 11;  // longer than stored
  EvalResultReader shorter(db_, row);
  EXPECT_THROW(shorter.drainInto(sink), FormatError);
  row.bytes = 9;
  EvalResultReader longer(db_, row);
  EXPECT_THROW(longer.drainInto(sink), FormatError);
  db_.db().exec("UPDATE eval_result_chunks SET data = 'not base64!'");
  row.bytes = 10;
  EvalResultReader garbled(db_, row);
  EXPECT_THROW(garbled.drainInto(sink), Error);
}

INSTANTIATE_TEST_SUITE_P(Backends, EvalQueueTest, test::allStateBackends(),
                         test::stateBackendName);

}  // namespace
}  // namespace kiln::scheduler
