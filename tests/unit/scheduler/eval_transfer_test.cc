// The stream a `kiln evaluator` host publishes and the scheduler imports
// (eval_transfer.h): what arrives is what was sent, and a stream that lies
// (a NAR that is not the path's, a path that is not content-addressed,
// a truncated or padded stream) is refused with nothing of it valid. The
// evaluated sources travel along, bounded, and are kept only as a
// `source` path.
#include "eval_transfer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "kiln/store/compression.h"
#include "service_fixture.h"

namespace kiln::scheduler {
namespace {

using ::testing::HasSubstr;
using testing::makeDrv;

class EvalTransferTest : public ::testing::Test {
 protected:
  EvalTransferTest()
      : from_(dir_.path() + "/from"), to_(dir_.path() + "/to") {}

  // An outcome of jobs a and b (b depends on a) and a failed job, with a
  // source path among a's inputs.
  EvalOutcome outcome() {
    EvalOutcome o;
    o.jobset = 7;
    o.inputsHash = "sha256:abc";
    o.timeMs = 1000;
    o.durationMs = 20;
    a_ = makeDrv(from_, "a");
    b_ = makeDrv(from_, "b", {a_});
    Job ja, jb, broken;
    ja.attr = "a";
    ja.name = "a";
    ja.system = "x86_64-linux";
    ja.drvPath = a_;
    jb = ja;
    jb.attr = "b";
    jb.drvPath = b_;
    jb.schedulingPriority = 5;
    broken.attr = "broken";
    broken.error = "error: this job is broken";
    o.jobs = {ja, jb, broken};
    return o;
  }

  std::string stream(const EvalOutcome& o) {
    StringSink out;
    writeEvalStream(o, from_, out);
    return out.s;
  }

  // The stream with its uncompressed bytes edited by `edit`.
  static std::string edited(const std::string& s,
                            const std::function<void(std::string&)>& edit) {
    StringSource in(s);
    auto plain = store::makeDecompressionSource("zstd", in);
    StringSink raw;
    plain->drainInto(raw);
    edit(raw.s);
    StringSink out;
    auto z = store::makeCompressionSink("zstd", out);
    z->write(raw.s);
    z->finish();
    return out.s;
  }

  TempDir dir_{"kiln-eval-transfer"};
  store::LocalStore from_, to_;
  std::string a_, b_;
};

TEST_F(EvalTransferTest, WhatArrivesIsWhatWasSent) {
  auto sent = outcome();
  std::string s = stream(sent);
  StringSource in(s);
  EvalOutcome got = readEvalStream(in, to_);
  EXPECT_EQ(got.jobset, 7);
  EXPECT_EQ(got.inputsHash, "sha256:abc");
  EXPECT_EQ(got.timeMs, 1000);
  EXPECT_EQ(got.durationMs, 20);
  ASSERT_EQ(got.jobs.size(), 3u);
  EXPECT_EQ(got.jobs[1].drvPath, b_);
  EXPECT_EQ(got.jobs[1].schedulingPriority, 5);
  EXPECT_EQ(got.jobs[2].error, "error: this job is broken");
  EXPECT_TRUE(to_.isValid(to_.parsePath(a_)));
  EXPECT_TRUE(to_.isValid(to_.parsePath(b_)));
  // The `.drv`s it added come parsed and checked: the prefetch of the
  // jobs' closures takes them instead of reading them again.
  ASSERT_TRUE(got.drvs);
  ASSERT_TRUE(got.drvs->count(b_));
  EXPECT_EQ(got.drvs->at(b_)->name, "b");
  auto closure = prefetchDrvs(to_, {b_}, got.drvs.get());
  EXPECT_EQ(closure->at(b_), got.drvs->at(b_));
  // A second import of the same closure skips what is valid.
  StringSource again(s);
  auto second = readEvalStream(again, to_);
  EXPECT_EQ(second.jobs.size(), 3u);
  EXPECT_TRUE(second.drvs->empty());
  EXPECT_EQ(prefetchDrvs(to_, {b_}, second.drvs.get())->size(),
            closure->size());
}

// Jobs in any order, and a diamond (d needs b and c, c needs b): every
// path still arrives after its references.
TEST_F(EvalTransferTest, ReferencesComeFirstWhateverTheJobsOrder) {
  auto b = makeDrv(from_, "b");
  auto c = makeDrv(from_, "c", {b});
  auto d = makeDrv(from_, "d", {b, c});
  EvalOutcome o;
  for (auto& [attr, drv] : std::vector<std::pair<std::string, std::string>>{
           {"d", d}, {"c", c}, {"b", b}}) {
    Job j;
    j.attr = attr;
    j.name = attr;
    j.system = "x86_64-linux";
    j.drvPath = drv;
    o.jobs.push_back(j);
  }
  std::string s = stream(o);
  StringSource in(s);
  EXPECT_EQ(readEvalStream(in, to_).jobs.size(), 3u);
  for (auto& p : {b, c, d}) EXPECT_TRUE(to_.isValid(to_.parsePath(p))) << p;
}

TEST_F(EvalTransferTest, ANarThatIsNotThePathsIsRefused) {
  std::string s = edited(stream(outcome()), [](std::string& raw) {
    auto at = raw.find("echo b > $out");
    ASSERT_NE(at, std::string::npos);
    raw[at + 5] = 'B';
  });
  StringSource in(s);
  EXPECT_THROW(readEvalStream(in, to_), Error);
  EXPECT_FALSE(to_.isValid(to_.parsePath(b_)));
}

TEST_F(EvalTransferTest, APathThatIsNotContentAddressedIsRefused) {
  std::string s = edited(stream(outcome()), [](std::string& raw) {
    // Empty the first path's CA field, keeping the record's length with
    // blanks after the object (JSON allows them).
    auto at = raw.find("\"ca\":\"text:");
    ASSERT_NE(at, std::string::npos);
    auto end = raw.find('"', at + 6);
    size_t cut = end - at - 6;
    raw.erase(at + 6, cut);
    raw.insert(raw.find('}', at) + 1, std::string(cut, ' '));
  });
  StringSource in(s);
  try {
    readEvalStream(in, to_);
    ADD_FAILURE() << "accepted";
  } catch (const FormatError& e) {
    EXPECT_THAT(e.what(), HasSubstr("not content-addressed"));
  }
  EXPECT_FALSE(to_.isValid(to_.parsePath(a_)));
}

TEST_F(EvalTransferTest, TruncatedOrPaddedStreamsAreRefused) {
  std::string s = edited(stream(outcome()), [](std::string& raw) {
    raw.resize(raw.size() - 9);  // no end record
  });
  StringSource in(s);
  EXPECT_THROW(readEvalStream(in, to_), FormatError);
  s = edited(stream(outcome()), [](std::string& raw) { raw += "x"; });
  StringSource padded(s);
  EXPECT_THROW(readEvalStream(padded, to_), FormatError);
  StringSource garbage(std::string("not zstd at all"));
  EXPECT_THROW(readEvalStream(garbage, to_), FormatError);
}

// The evaluated checkout, as the evaluator keeps it: a `source` path.
std::string addSources(store::LocalStore& store, const std::string& dir) {
  createDirs(dir + "/lib");
  writeFile(dir + "/default.nix", "import ./lib\n");
  writeFile(dir + "/lib/default.nix", "{ }\n");
  return store.printPath(store.addPath(dir, "source"));
}

TEST_F(EvalTransferTest, TheSourcesTravelWithTheDerivations) {
  auto sent = outcome();
  sent.sources = addSources(from_, dir_.path() + "/checkout");
  std::string s = stream(sent);
  StringSource in(s);
  EvalOutcome got = readEvalStream(in, to_);
  EXPECT_EQ(got.sources, sent.sources);
  auto path = to_.parsePath(got.sources);
  ASSERT_TRUE(to_.isValid(path));
  EXPECT_EQ(readFile(to_.physicalPath(path) + "/lib/default.nix"), "{ }\n");
  EXPECT_EQ(got.jobs.size(), 3u);
  // Already valid the second time: named, not stored again.
  StringSource again(s);
  EXPECT_EQ(readEvalStream(again, to_).sources, sent.sources);
}

TEST_F(EvalTransferTest, SourcesOverTheBoundAreNotKept) {
  auto sent = outcome();
  sent.sources = addSources(from_, dir_.path() + "/checkout");
  std::string s = stream(sent);
  StringSource in(s);
  EvalStreamLimits limits;
  limits.maxSourceBytes = 64;
  EvalOutcome got = readEvalStream(in, to_, limits);
  EXPECT_EQ(got.sources, "");
  EXPECT_FALSE(to_.isValid(to_.parsePath(sent.sources)));
  // The evaluation stands.
  EXPECT_EQ(got.jobs.size(), 3u);
  EXPECT_TRUE(to_.isValid(to_.parsePath(b_)));
}

// Sources must be a `source` path without references: a header naming a
// `.drv` (valid, sent as the closure) gets no sources.
TEST_F(EvalTransferTest, SourcesThatAreNoSourcePathAreDropped) {
  auto sent = outcome();
  sent.sources = b_;
  std::string s = stream(sent);
  StringSource in(s);
  EvalOutcome got = readEvalStream(in, to_);
  EXPECT_EQ(got.sources, "");
  EXPECT_EQ(got.jobs.size(), 3u);
}

}  // namespace
}  // namespace kiln::scheduler
