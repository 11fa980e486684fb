// DirectUploadMetrics (direct_upload_metrics.h).
#include "direct_upload_metrics.h"

namespace kiln::scheduler {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

DirectUploadMetrics::DirectUploadMetrics(prometheus::Registry& r)
    : staged_(BuildCounter()
                  .Name("kiln_direct_staged_objects_total")
                  .Help("Outputs workers staged in the object store and "
                        "announced (OutputStaged), taken for verification")
                  .Register(r)
                  .Add({})),
      stagedBytes_(BuildCounter()
                       .Name("kiln_direct_staged_bytes_total")
                       .Help("Compressed bytes of the staged objects taken "
                             "for verification")
                       .Register(r)
                       .Add({})),
      failures_(BuildCounter()
                    .Name("kiln_direct_verify_failures_total")
                    .Help("Staged objects refused by the verifier or that "
                          "it could not read or publish (the step is "
                          "retried or fails)")
                    .Register(r)
                    .Add({})),
      seconds_(BuildHistogram()
                   .Name("kiln_direct_verify_seconds")
                   .Help("Time to verify and publish one staged object "
                         "(read once from the store)")
                   .Register(r)
                   .Add({},
                        prometheus::Histogram::BucketBoundaries{
                            0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
                            300})),
      queue_(BuildGauge()
                 .Name("kiln_direct_verifier_queue")
                 .Help("Jobs waiting for the direct uploads' verifier "
                       "thread (grants, verifications, cleanups)")
                 .Register(r)
                 .Add({})) {}

void DirectUploadMetrics::countStaged(uint64_t bytes) {
  staged_.Increment();
  stagedBytes_.Increment(double(bytes));
}

void DirectUploadMetrics::observeVerification(double seconds, bool ok) {
  seconds_.Observe(seconds);
  if (!ok) failures_.Increment();
}

}  // namespace kiln::scheduler
