#pragma once
// The push webhook's defence against replays (api_eval.cc): each valid
// signature is accepted once within the window its timestamp must fall in.

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "kiln/common/sync.h"

namespace kiln::web {

/// Remembers the signatures of accepted pushes until they are too old to
/// be accepted anyway. Thread-safe.
class PushReplayGuard {
 public:
  /// A push's timestamp may be at most `windowSec` from the clock, either
  /// way; at most `maxRemembered` signatures are kept (the oldest go
  /// first, each of which is then also close to expiring).
  explicit PushReplayGuard(int64_t windowSec = 300,
                           size_t maxRemembered = 100000)
      : windowSec_(windowSec), max_(maxRemembered) {}
  /// Whether `timestamp` (Unix seconds) is within the window of `nowSec`.
  bool fresh(int64_t timestamp, int64_t nowSec) const;
  /// Records `signature` (of a push stamped `timestamp`) as used; false
  /// when it was used before (a replay).
  bool firstUse(const std::string& signature, int64_t timestamp,
                int64_t nowSec);
  int64_t windowSec() const { return windowSec_; }

 private:
  struct Seen {
    std::set<std::string> signatures;
    std::set<std::pair<int64_t, std::string>> byTime;
  };
  int64_t windowSec_;
  size_t max_;
  Sync<Seen> seen_;
};

}  // namespace kiln::web
