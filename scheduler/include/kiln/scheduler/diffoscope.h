#pragma once
/// The report of what differs between the two builds of a step that a
/// reproducibility check found not deterministic (docs/release.md,
/// "Reproducibility checks"): Debian's `diffoscope` run as a child process
/// with a time limit and bounded output, on a thread of its own so that the
/// scheduler's event loop never waits for it.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "kiln/common/process.h"

namespace kiln::scheduler {

/// What one comparison found.
struct DiffReport {
  enum class Outcome {
    kDiffers,      ///< `text` says how
    kSame,         ///< the tool found no difference
    kTimedOut,     ///< killed at the time limit; `text` holds what it wrote
    kUnavailable,  ///< the tool is not installed
    kFailed,       ///< it ended with an error; `text` holds its output
  };
  Outcome outcome = Outcome::kFailed;
  std::string text;        ///< the report (plain text), at most maxBytes
  bool truncated = false;  ///< `text` was cut at maxBytes
};

/// "differs", "same", "timed-out", "unavailable" or "failed".
const char* diffOutcomeName(DiffReport::Outcome o);

/// Compares two files or folders. Implementations may block; callers run
/// them off the event loop (DiffQueue).
class Differ {
 public:
  virtual ~Differ() = default;
  /// What differs between `first` and `second` (paths on this machine).
  /// Never throws: failures are reported as kFailed or kUnavailable.
  virtual DiffReport diff(const std::string& first,
                          const std::string& second) = 0;
};

/// Limits of one diffoscope run.
struct DiffoscopeLimits {
  std::chrono::milliseconds timeLimit{std::chrono::minutes(5)};
  size_t maxBytes = 1 << 20;  ///< report text kept (the rest is dropped)
};

/// The real Differ: `program` (default "diffoscope", looked up in PATH)
/// with `--text -`, started through `launcher`, killed with its process
/// group at the time limit.
class DiffoscopeDiffer : public Differ {
 public:
  /// `launcher` is borrowed and must outlive this object.
  DiffoscopeDiffer(ProcessLauncher& launcher, DiffoscopeLimits limits = {},
                   std::string program = "diffoscope");
  DiffReport diff(const std::string& first, const std::string& second) override;

 private:
  ProcessLauncher& launcher_;
  DiffoscopeLimits limits_;
  std::string program_;
};

/// Runs comparisons one at a time on its own thread, in submission order,
/// and hands each report to its callback on that thread (the callback must
/// not throw; exceptions are caught and dropped). At most `maxQueued`
/// comparisons wait; more are refused. The destructor drops what has not
/// started and waits for the running one to end (bounded by its limit).
class DiffQueue {
 public:
  using Done = std::function<void(DiffReport)>;
  /// `differ` is borrowed and must outlive the queue.
  explicit DiffQueue(Differ& differ, size_t maxQueued = 64);
  ~DiffQueue();
  DiffQueue(const DiffQueue&) = delete;
  DiffQueue& operator=(const DiffQueue&) = delete;
  /// Queues a comparison; false if the queue is full.
  bool submit(std::string first, std::string second, Done done);

 private:
  struct Job {
    std::string first;
    std::string second;
    Done done;
  };
  void run();

  Differ& differ_;
  size_t maxQueued_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kiln::scheduler
