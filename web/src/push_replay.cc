// Replayed pushes (push_replay.h).
#include "push_replay.h"

namespace kiln::web {

bool PushReplayGuard::fresh(int64_t timestamp, int64_t nowSec) const {
  return timestamp >= nowSec - windowSec_ && timestamp <= nowSec + windowSec_;
}

bool PushReplayGuard::firstUse(const std::string& signature, int64_t timestamp,
                               int64_t nowSec) {
  auto s = seen_.lock();
  // Forget what can no longer pass `fresh`, and the oldest beyond the cap.
  while (!s->byTime.empty() &&
         (s->byTime.begin()->first < nowSec - windowSec_ ||
          s->byTime.size() >= max_)) {
    s->signatures.erase(s->byTime.begin()->second);
    s->byTime.erase(s->byTime.begin());
  }
  if (!s->signatures.insert(signature).second) return false;
  s->byTime.emplace(timestamp, signature);
  return true;
}

}  // namespace kiln::web
