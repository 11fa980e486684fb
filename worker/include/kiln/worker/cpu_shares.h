#pragma once
/// CPU shares of a worker's concurrent builds (docs/worker.md, "CPU
/// shares"). A worker with more slots than CPUs runs more builders than it
/// can serve at once; left alone they share the CPUs evenly, so the step a
/// whole chain of dependents waits for runs as slowly as one nothing
/// waits for. CpuShares gives the CPUs to the `cores` running builders of
/// highest rank (BuildStep.rankMs, the step's critical path) and puts the
/// others at the lowest share: they run on what the first leave idle.
///
/// Each builder leads its own session, and with Linux's autogroups
/// (/proc/sys/kernel/sched_autogroup_enabled = 1) a session is a
/// scheduling group of its own whose weight only its autogroup nice
/// (/proc/PID/autogroup) sets: a plain nice() would only rank the
/// builder's processes among themselves.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::worker {

/// Sets the CPU weight of a builder's session against other sessions.
class SessionNice {
 public:
  virtual ~SessionNice() = default;
  /// Sets the nice (-20..19) of the session `pid` leads. Returns false,
  /// changing nothing, when `pid` is gone, does not lead its own session
  /// (that would renice the worker's own group), or the system refused.
  virtual bool set(pid_t pid, int nice) = 0;
};

/// Linux's autogroup nice, written to `procDir`/PID/autogroup. Null (and
/// one debug line) when autogroups are off or the kernel has none: builds
/// then share the CPUs evenly.
std::shared_ptr<SessionNice> procAutogroupNice(
    const std::string& procDir = "/proc");

/// A running builder as the policy sees it.
struct ShareEntry {
  uint64_t rankMs = 0;  ///< BuildStep.rankMs
  uint64_t order = 0;   ///< start order: lower started earlier
};

/// Nice of a builder that gets CPU time as it wants.
inline constexpr int kFullShareNice = 0;
/// Nice of a builder that runs on what the others leave idle (autogroup
/// weight 15 against 1024).
inline constexpr int kIdleShareNice = 19;

/// The policy: one nice per entry of `builds`, in their order. The
/// `cores` builders of highest rank (the earlier started first among equal
/// ranks, so that a started build finishes) get kFullShareNice, the rest
/// kIdleShareNice. O(n log n).
std::vector<int> shareNices(const std::vector<ShareEntry>& builds,
                            unsigned cores);

/// The running builders of one worker and their shares. Thread-safe: slot
/// threads report their builders' starts and ends; each report applies
/// the policy again, writing only the nices that change.
class CpuShares {
 public:
  /// Borrows nothing; `nice` must not be null; `cores` ≥ 1 (0 counts 1).
  CpuShares(std::shared_ptr<SessionNice> nice, unsigned cores);
  /// A builder started (after its setsid: a sandbox's start returns once
  /// the builder runs). Returns the ticket for exited().
  uint64_t started(pid_t pid, uint64_t rankMs);
  /// The builder of `ticket` ended. Call before reaping it, so that its
  /// pid cannot be reused meanwhile. Unknown tickets are ignored.
  void exited(uint64_t ticket);
  /// The CPU count the policy serves.
  unsigned cores() const { return cores_; }

 private:
  struct Running {
    pid_t pid = 0;
    uint64_t rankMs = 0;
    int nice = kFullShareNice;  // a new session's autogroup starts at 0
  };
  void apply();  // with mutex_ held

  std::shared_ptr<SessionNice> nice_;
  unsigned cores_;
  std::mutex mutex_;
  std::map<uint64_t, Running> running_;  // by ticket = start order
  uint64_t nextTicket_ = 1;
};

/// A builder's place in CpuShares from its start until release() or
/// destruction, whichever comes first. A null CpuShares holds nothing.
class CpuShareHold {
 public:
  CpuShareHold(CpuShares* shares, pid_t pid, uint64_t rankMs);
  ~CpuShareHold() { release(); }
  CpuShareHold(const CpuShareHold&) = delete;
  CpuShareHold& operator=(const CpuShareHold&) = delete;
  /// Leaves CpuShares (before the builder is reaped). Idempotent.
  void release();

 private:
  CpuShares* shares_;
  uint64_t ticket_ = 0;
};

}  // namespace kiln::worker
