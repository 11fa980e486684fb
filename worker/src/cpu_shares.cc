// CPU shares of concurrent builds (cpu_shares.h, docs/worker.md).
#include "kiln/worker/cpu_shares.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <numeric>

#include "kiln/common/file.h"
#include "kiln/common/logging.h"

namespace kiln::worker {
namespace {

class ProcAutogroupNice final : public SessionNice {
 public:
  explicit ProcAutogroupNice(std::string procDir)
      : procDir_(std::move(procDir)) {}

  bool set(pid_t pid, int nice) override {
    if (pid <= 0 || ::getsid(pid) != pid) return false;
    std::string path = procDir_ + "/" + std::to_string(pid) + "/autogroup";
    AutoCloseFD fd(::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
    std::string text = std::to_string(std::clamp(nice, -20, 19));
    if (fd && ::write(fd.get(), text.data(), text.size()) ==
                  static_cast<ssize_t>(text.size()))
      return true;
    // Unprivileged writers are limited to one write per 100 ms (EAGAIN):
    // the next start or end of a build tries again.
    if (!warned_.exchange(true))
      logDebug("worker: cannot set the CPU share of builder " +
               std::to_string(pid) + " (" + path +
               "): " + std::strerror(errno));
    return false;
  }

 private:
  std::string procDir_;
  std::atomic<bool> warned_{false};
};

}  // namespace

std::shared_ptr<SessionNice> procAutogroupNice(const std::string& procDir) {
  std::string flag = procDir + "/sys/kernel/sched_autogroup_enabled";
  std::string value;
  try {
    value = readFile(flag);
  } catch (const std::exception&) {
    value.clear();
  }
  if (value.empty() || value[0] != '1') {
    logDebug("worker: no CPU shares by critical path: " + flag +
             (value.empty() ? " is missing" : " is not 1") +
             ", concurrent builds share the CPUs evenly");
    return nullptr;
  }
  return std::make_shared<ProcAutogroupNice>(procDir);
}

std::vector<int> shareNices(const std::vector<ShareEntry>& builds,
                            unsigned cores) {
  std::vector<size_t> order(builds.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (builds[a].rankMs != builds[b].rankMs)
      return builds[a].rankMs > builds[b].rankMs;
    return builds[a].order < builds[b].order;
  });
  std::vector<int> nices(builds.size(), kIdleShareNice);
  for (size_t i = 0; i < order.size() && i < std::max(cores, 1u); ++i)
    nices[order[i]] = kFullShareNice;
  return nices;
}

CpuShares::CpuShares(std::shared_ptr<SessionNice> nice, unsigned cores)
    : nice_(std::move(nice)), cores_(std::max(cores, 1u)) {}

uint64_t CpuShares::started(pid_t pid, uint64_t rankMs) {
  std::lock_guard lock(mutex_);
  uint64_t ticket = nextTicket_++;
  running_.emplace(ticket, Running{pid, rankMs});
  apply();
  return ticket;
}

void CpuShares::exited(uint64_t ticket) {
  std::lock_guard lock(mutex_);
  if (running_.erase(ticket)) apply();
}

void CpuShares::apply() {
  std::vector<ShareEntry> entries;
  entries.reserve(running_.size());
  for (auto& [ticket, r] : running_) entries.push_back({r.rankMs, ticket});
  auto nices = shareNices(entries, cores_);
  size_t i = 0;
  for (auto& [ticket, r] : running_) {
    int want = nices[i++];
    if (want != r.nice && nice_->set(r.pid, want)) r.nice = want;
  }
}

CpuShareHold::CpuShareHold(CpuShares* shares, pid_t pid, uint64_t rankMs)
    : shares_(shares) {
  if (shares_) ticket_ = shares_->started(pid, rankMs);
}

void CpuShareHold::release() {
  if (shares_) shares_->exited(ticket_);
  shares_ = nullptr;
}

}  // namespace kiln::worker
