#pragma once
/// The job collection the `kiln eval --workers/--processes` tests share and
/// the per-job error lines they expect of it.

#include <string>

namespace kiln::test {

/// An expression importing tests/data/eval_threads/jobs.nix:
/// `packages` top-level jobs p0..p<packages-1>, each depending on the one at
/// half its index (so parallel evaluators meet shared thunks), a nested set
/// entered through recurseForDerivations (`nested.a`, and `nested.bad`, a
/// type error) and `broken` (a throw): packages + 3 jobs, 2 of them failing.
std::string evalJobsCollection(int packages);

/// Checks (gtest EXPECTs) that `out`, the JSON lines of `kiln eval --json`
/// on evalJobsCollection, reports `broken` and `nested.bad` as errors and
/// `nested.a` as a job.
void expectPerJobErrors(const std::string& out);

}  // namespace kiln::test
