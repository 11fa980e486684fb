#pragma once
// A fresh state database of the test's backend (state_backends.h) holding
// project "p" and its jobset "trunk": the rows most release-engineering
// state tests start from.

#include <gtest/gtest.h>

#include <string>

#include "kiln/common/file.h"
#include "kiln/scheduler/state_db.h"
#include "state_backends.h"

namespace kiln::test {

/// Project "p", jobset "trunk" (at /src, `repeatPpm` as given) in `db_`.
class JobsetFixture : public ::testing::TestWithParam<StateBackend> {
 protected:
  explicit JobsetFixture(int64_t repeatPpm = 0) {
    int64_t project = db_.createProject({0, "p", "", true});
    scheduler::JobsetRow j;
    j.project = project;
    j.name = "trunk";
    j.location = "/src";
    j.repeatPpm = repeatPpm;
    jobset_ = db_.createJobset(j);
  }
  /// A new evaluation of the jobset with inputs `inputs`.
  int64_t eval(const std::string& inputs) {
    return db_.createEvaluation({0, jobset_, inputs, 1, 1, 1, ""}, {});
  }
  /// The step of `drvPath` (package `pname`), unfinished.
  int64_t step(const std::string& drvPath, const std::string& pname = "") {
    scheduler::StepRow s;
    s.drvPath = drvPath;
    s.system = "x86_64-linux";
    s.pname = pname;
    s.createdMs = 1;
    return db_.upsertStep(s);
  }
  /// An unfinished build of `job` (derivation `drvPath`) in `eval`.
  int64_t build(int64_t eval, const std::string& job,
                const std::string& drvPath) {
    scheduler::BuildRow b;
    b.eval = eval;
    b.jobset = jobset_;
    b.job = job;
    b.drvPath = drvPath;
    b.createdMs = 1;
    return db_.createBuild(b);
  }

  TempDir dir_{"kiln-jobset-state"};
  scheduler::DatabaseSpec spec_ = freshStateDatabase(GetParam(), dir_.path());
  scheduler::StateDb db_{spec_};
  int64_t jobset_ = 0;
};

}  // namespace kiln::test
