// Fail points: kill the process at a named boundary (fail_point.h).
#include "kiln/common/fail_point.h"

#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>

#include "kiln/common/error.h"

namespace kiln {

FailPointSpec::FailPointSpec(std::string_view spec) {
  if (spec.empty()) return;
  auto colon = spec.rfind(':');
  std::string_view name = spec.substr(0, colon);
  if (colon != std::string_view::npos) {
    auto count = spec.substr(colon + 1);
    auto [end, ec] =
        std::from_chars(count.data(), count.data() + count.size(), at_);
    if (ec != std::errc() || end != count.data() + count.size() || at_ == 0)
      throw FormatError("fail point '" + std::string(spec) +
                        "': the count after ':' must be a number >= 1");
  }
  if (name.empty())
    throw FormatError("fail point '" + std::string(spec) + "' has no name");
  name_ = name;
}

bool FailPointSpec::hit(std::string_view point) {
  if (point != name_) return false;
  return hits_.fetch_add(1, std::memory_order_relaxed) + 1 == at_;
}

FailPointSpec& processFailPoints() {
  static FailPointSpec spec = [] {
    const char* v = std::getenv("KILN_FAIL_POINT");
    try {
      return FailPointSpec(v ? v : "");
    } catch (const FormatError& e) {
      std::string msg =
          std::string("kiln: ignoring KILN_FAIL_POINT: ") + e.what() + "\n";
      (void)!::write(2, msg.data(), msg.size());
      return FailPointSpec("");
    }
  }();
  return spec;
}

namespace {
// Whether $KILN_FAIL_POINT arms anything: 0 unknown, 1 no, 2 yes.
std::atomic<int> gArmed{0};
}  // namespace

void failPoint(std::string_view point) {
  int armed = gArmed.load(std::memory_order_relaxed);
  if (armed == 1) return;
  auto& spec = processFailPoints();
  if (armed == 0) gArmed.store(spec.armed() ? 2 : 1, std::memory_order_relaxed);
  if (!spec.hit(point)) return;
  std::string msg = "kiln: fail point " + std::string(point) + " reached\n";
  (void)!::write(2, msg.data(), msg.size());
  ::kill(::getpid(), SIGKILL);
  ::_exit(137);  // not reached
}

}  // namespace kiln
