#pragma once
// A fake of the worker's pressure seam (kiln/worker/pressure.h): the test
// sets the figures the next heartbeats report.

#include <mutex>

#include "kiln/worker/pressure.h"

namespace kiln::testing {

/// Reports what `set` last gave (nothing known at first). Thread-safe: the
/// daemon reads on its thread while the test sets.
class FakePressureSource : public worker::PressureSource {
 public:
  worker::MachinePressure read() override {
    std::lock_guard lock(mutex_);
    ++reads_;
    return value_;
  }
  void set(const worker::MachinePressure& value) {
    std::lock_guard lock(mutex_);
    value_ = value;
  }
  /// How many times the daemon read the figures.
  unsigned reads() {
    std::lock_guard lock(mutex_);
    return reads_;
  }

 private:
  std::mutex mutex_;
  worker::MachinePressure value_;
  unsigned reads_ = 0;
};

}  // namespace kiln::testing
