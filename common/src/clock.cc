#include "kiln/common/clock.h"

namespace kiln {

RealClock& RealClock::instance() {
  static RealClock clock;
  return clock;
}

}  // namespace kiln
