#pragma once
/// The schedulers a worker may follow (docs/worker.md, "Fail-over"): an
/// active scheduler and its standbys, of which only the one holding the
/// farm's lock listens. Pure bookkeeping, no I/O: the daemon asks which
/// endpoint to try, and moves on when it does not answer.

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace kiln::worker {

/// An ordered, non-empty list of scheduler endpoints with a position,
/// moved round-robin, and the pause before each full round after the
/// first (doubling from `pauseMin` to `pauseMax`, back to `pauseMin` once
/// an endpoint answers). Copyable; not thread-safe.
class EndpointList {
 public:
  /// The endpoints of `specs` in order, each spec one endpoint or several
  /// separated by commas (blanks around them are ignored). Throws Error
  /// for an empty list, an endpoint without `TRANSPORT://ADDRESS` (a `tcp`
  /// one without `HOST:PORT`) or one given twice.
  static std::vector<std::string> parse(const std::vector<std::string>& specs);

  /// Starts at the first of `endpoints`. Throws Error if it is empty.
  explicit EndpointList(
      std::vector<std::string> endpoints,
      std::chrono::milliseconds pauseMin = std::chrono::milliseconds(100),
      std::chrono::milliseconds pauseMax = std::chrono::milliseconds(10000));

  /// The endpoint to follow now.
  const std::string& current() const { return endpoints_[index_]; }
  /// How many endpoints there are (at least one).
  size_t size() const { return endpoints_.size(); }
  /// All endpoints, in order.
  const std::vector<std::string>& all() const { return endpoints_; }

  /// Gives up on current() and moves to the next endpoint, the first
  /// after the last. Returns how long to wait before trying it: zero,
  /// unless every endpoint was tried since the last answer (a full
  /// round), then the round's pause, which doubles for the next round.
  std::chrono::milliseconds next();
  /// current() answered (it welcomed the worker): the next full round
  /// starts from there, after `pauseMin`.
  void answered();

 private:
  std::vector<std::string> endpoints_;
  size_t index_ = 0;
  size_t triedSinceAnswer_ = 0;
  std::chrono::milliseconds pauseMin_;
  std::chrono::milliseconds pauseMax_;
  std::chrono::milliseconds pause_;
};

}  // namespace kiln::worker
