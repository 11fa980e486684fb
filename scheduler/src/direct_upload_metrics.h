#pragma once
// The `kiln_direct_*` Prometheus families of direct uploads
// (docs/operations.md, "Metrics"). prometheus-cpp's metrics are atomic:
// the service thread and the verifier thread both update them.

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>

namespace kiln::scheduler {

/// What direct uploads did, for /metrics. Borrows the registry, which
/// must outlive it.
class DirectUploadMetrics {
 public:
  /// Registers the families in `registry`.
  explicit DirectUploadMetrics(prometheus::Registry& registry);

  /// A worker's OutputStaged was taken for verification (`bytes`: the
  /// compressed object's size it reports).
  void countStaged(uint64_t bytes);
  /// One verification (and publication) took `seconds`; `ok` false when
  /// the object was refused or the store failed.
  void observeVerification(double seconds, bool ok);
  /// Jobs waiting for the verifier thread (grants, verifications,
  /// cleanups).
  void setQueueLength(size_t n) { queue_.Set(double(n)); }

 private:
  prometheus::Counter& staged_;
  prometheus::Counter& stagedBytes_;
  prometheus::Counter& failures_;
  prometheus::Histogram& seconds_;
  prometheus::Gauge& queue_;
};

}  // namespace kiln::scheduler
