// GC roots of evaluations' kept sources (source_roots.h), on both state
// backends: a collection after the sync keeps the sources of each jobset's
// latest evaluation and of its channel's, and collects those of an
// evaluation nothing references any more.
#include "kiln/scheduler/source_roots.h"

#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "kiln/scheduler/release_store.h"
#include "state_backends.h"

namespace kiln::scheduler {
namespace {

class SourceRootsTest : public ::testing::TestWithParam<test::StateBackend> {
 protected:
  SourceRootsTest() : store_(dir_.path() + "/state") {}

  /// A finished evaluation of the jobset whose one build (job "tested")
  /// succeeded, with sources holding `text`, rooted as the scheduler
  /// roots them; returns the evaluation and sets `build`.
  int64_t eval(StateDb& db, const std::string& text, int64_t* build) {
    if (!jobset_) {
      int64_t project = db.createProject({0, "p", "", true});
      JobsetRow j;
      j.project = project;
      j.name = "js";
      j.location = "/src";
      jobset_ = db.createJobset(j);
    }
    std::string sources = addSources(text);
    int64_t e = db.createEvaluation({0, jobset_, text, 1, 1, 1, ""}, {});
    setEvalSources(db, e, sources);
    rootEvalSources(store_, e, sources);
    BuildRow b;
    b.eval = e;
    b.jobset = jobset_;
    b.job = "tested";
    b.drvPath = "/nix/store/" + std::string(32, 'd') + "-tested.drv";
    *build = db.createBuild(b);
    db.finishBuild(*build, 0, 2, "");
    return e;
  }

  /// A `source` path holding `text`, added by a store handle of its own
  /// (its temporary roots end with it, as an evaluation's do).
  std::string addSources(const std::string& text) {
    std::string dir = dir_.path() + "/checkout-" + text;
    createDirs(dir);
    writeFile(dir + "/default.nix", text);
    store::LocalStore adder(dir_.path() + "/state");
    return adder.printPath(adder.addPath(dir, "source"));
  }

  bool kept(StateDb& db, int64_t e) {
    return store_.isValid(store_.parsePath(evalSources(db, e)));
  }

  TempDir dir_{"kiln-source-roots"};
  DatabaseSpec spec_ = test::freshStateDatabase(GetParam(), dir_.path());
  store::LocalStore store_;
  int64_t jobset_ = 0;
};

INSTANTIATE_TEST_SUITE_P(Backends, SourceRootsTest, test::allStateBackends(),
                         test::stateBackendName);

TEST_P(SourceRootsTest, ACollectionKeepsReferencedSourcesOnly) {
  StateDb db(spec_);
  int64_t build = 0;
  int64_t channel = eval(db, "channel", &build);
  recordChannelAdvance(db, {jobset_, channel, build, std::nullopt}, 5);
  int64_t old = eval(db, "old", &build);
  int64_t latest = eval(db, "latest", &build);
  // Without the sync, the scheduler's roots keep every evaluation's.
  EXPECT_TRUE(store_.collectGarbage().deleted.empty());
  // The latest root went missing (say, rooted by hand and removed): the
  // sync restores it, and drops the one of the evaluation no longer kept.
  ASSERT_TRUE(store_.removeRoot(evalSourcesRoot(latest)));
  auto sync = syncEvalSourceRoots(db, store_, 1);
  EXPECT_EQ(sync.kept, 2u);
  EXPECT_EQ(sync.added, 1u);
  EXPECT_EQ(sync.removed, 1u);
  auto gc = store_.collectGarbage();
  ASSERT_EQ(gc.deleted.size(), 1u);
  EXPECT_EQ(store_.printPath(gc.deleted[0]), evalSources(db, old));
  EXPECT_TRUE(kept(db, channel));
  EXPECT_TRUE(kept(db, latest));
  EXPECT_FALSE(kept(db, old));
  // Idempotent; keeping two evaluations keeps what is left.
  sync = syncEvalSourceRoots(db, store_, 2);
  EXPECT_EQ(sync.kept, 2u);
  EXPECT_EQ(sync.added + sync.removed, 0u);
}

// The plan (a dry run's) changes no root, and previewing the collection
// with it lists what the collection after the sync deletes.
TEST_P(SourceRootsTest, ThePlannedPreviewMatchesTheSyncedCollection) {
  StateDb db(spec_);
  int64_t build = 0;
  int64_t old = eval(db, "old", &build);
  int64_t latest = eval(db, "latest", &build);
  ASSERT_TRUE(store_.removeRoot(evalSourcesRoot(latest)));
  auto plan = planEvalSourceRoots(db, store_, 1);
  EXPECT_EQ(plan.rooted, 0u);
  ASSERT_EQ(plan.add.size(), 1u);
  EXPECT_EQ(plan.add.begin()->first, latest);
  ASSERT_EQ(plan.drop.size(), 1u);
  EXPECT_EQ(plan.drop.begin()->first, old);
  auto counts = plan.counts();
  EXPECT_EQ(counts.kept, 1u);
  EXPECT_EQ(counts.added, 1u);
  EXPECT_EQ(counts.removed, 1u);
  auto preview = store_.previewGarbage(plan.gcChanges(store_));
  ASSERT_EQ(preview.deleted.size(), 1u);
  EXPECT_EQ(store_.printPath(preview.deleted[0]), evalSources(db, old));
  // Nothing changed: the old root still holds, the latest is unrooted,
  // so a plain dry run lists the latest's sources instead.
  EXPECT_TRUE(kept(db, old));
  auto plain = store_.collectGarbage(true);
  ASSERT_EQ(plain.deleted.size(), 1u);
  EXPECT_EQ(store_.printPath(plain.deleted[0]), evalSources(db, latest));
  // The real run deletes what the preview listed.
  auto sync = syncEvalSourceRoots(db, store_, 1);
  EXPECT_EQ(sync.added, counts.added);
  EXPECT_EQ(sync.removed, counts.removed);
  auto gc = store_.collectGarbage();
  EXPECT_EQ(gc.deleted, preview.deleted);
  EXPECT_EQ(gc.bytesFreed, preview.bytesFreed);
  EXPECT_FALSE(kept(db, old));
  EXPECT_TRUE(kept(db, latest));
}

// A root of an evaluation the database does not hold yet (a scheduler
// recording it meanwhile) stays.
TEST_P(SourceRootsTest, ARootNewerThanTheDatabaseStays) {
  StateDb db(spec_);
  int64_t build = 0;
  int64_t e = eval(db, "one", &build);
  auto next = store_.parsePath(addSources("next"));
  rootEvalSources(store_, e + 1, store_.printPath(next));
  EXPECT_EQ(syncEvalSourceRoots(db, store_, 1).removed, 0u);
  store_.collectGarbage();
  EXPECT_TRUE(store_.isValid(next));
  EXPECT_TRUE(kept(db, e));
}

}  // namespace
}  // namespace kiln::scheduler
