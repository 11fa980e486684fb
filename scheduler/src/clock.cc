#include "kiln/scheduler/clock.h"

namespace kiln::scheduler {

TimePoint SystemClock::now() const {
  return std::chrono::time_point_cast<Duration>(
      std::chrono::system_clock::now());
}

}  // namespace kiln::scheduler
