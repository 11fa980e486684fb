// Worker processes for parallel job evaluation (job_workers.h).
//
// Each worker has a socketpair for control (parent → worker: a batch of
// item indices per line; worker → parent: one byte 'r' per batch done), a
// pipe that is its stdout, and a shared page where it notes the item it is
// evaluating (read by the parent only if the worker dies). In the output,
// the worker prints a marker line after each item's job lines; the parent
// passes an item's lines on only when its marker arrives, so a worker that
// dies never leaves half an item behind. Batches keep the round trips per
// item low (jobs of a package set take tens of microseconds each).
#include "kiln/evaluator/job_workers.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <memory>
#include <vector>

#include "kiln/common/error.h"

namespace kiln::eval {
namespace {

constexpr std::string_view kMarker = "\x01kiln-eval-item-done ";
constexpr size_t kBatchesAhead = 2;  // batches queued per worker
constexpr size_t kMaxBatch = 256;

// What a worker is doing, in memory shared with the parent.
struct Progress {
  std::atomic<size_t> evaluating{0};  // item index + 1, or 0 between items
};

void writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SysError("writing evaluation output", errno);
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// Reads batches ("INDEX INDEX ...\n") from the control socket.
class CommandReader {
 public:
  explicit CommandReader(int fd) : fd_(fd) {}
  bool next(std::vector<size_t>& batch) {
    for (;;) {
      auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        batch.clear();
        const char* p = buf_.c_str();
        const char* end = p + nl;
        while (p < end) {
          char* q;
          batch.push_back(std::strtoull(p, &q, 10));
          p = q + (*q == ' ');
        }
        buf_.erase(0, nl + 1);
        return true;
      }
      char chunk[256];
      ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  int fd_;
  std::string buf_;
};

size_t peakResidentBytes() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<size_t>(ru.ru_maxrss) * 1024;
}

// Evaluates one batch; false when the worker must stop (over its memory
// limit) after the items done so far.
bool runBatch(const std::vector<size_t>& batch, JobWorkerHooks& hooks,
              Progress& progress, size_t maxMemory) {
  for (size_t index : batch) {
    progress.evaluating = index + 1;
    JobCounts c = hooks.evaluate(index);
    progress.evaluating = 0;
    hooks.print(std::string(kMarker) + std::to_string(c.jobs) + " " +
                std::to_string(c.failed) + "\n");
    if (maxMemory && peakResidentBytes() > maxMemory) return false;
  }
  return true;
}

// With KILN_EVAL_CPU_TIMES set (bench/eval_workers.sh), prints this
// process's CPU time so far (user + system) on stderr: the parent's before
// the first fork, each worker's when it exits. A forked child's count
// starts at zero, so the longest path through the run is the parent's
// figure plus the largest worker's, whatever other load the machine has.
void reportCpuTime(const char* who) {
  if (!std::getenv("KILN_EVAL_CPU_TIMES")) return;
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
  std::fprintf(stderr, "kiln eval cpu: %s %.3f\n", who,
               seconds(ru.ru_utime) + seconds(ru.ru_stime));
}

[[noreturn]] void workerMain(int ctl, JobWorkerHooks& hooks, Progress& progress,
                             size_t maxMemory) {
  int code = 0;
  try {
    hooks.startWorker();
    CommandReader in(ctl);
    std::vector<size_t> batch;
    while (in.next(batch)) {
      if (!runBatch(batch, hooks, progress, maxMemory)) break;
      if (::send(ctl, "r", 1, MSG_NOSIGNAL) != 1) break;  // the parent is gone
    }
    hooks.stopWorker();
    reportCpuTime("worker");
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    code = 1;
  }
  std::cout.flush();
  std::fflush(stdout);
  std::cerr.flush();
  ::_exit(code);
}

struct Worker {
  pid_t pid = -1;
  int ctl = -1;  // control socket (parent's end)
  int out = -1;  // the worker's stdout (read end)
  bool inputClosed = false;
  Progress* progress = nullptr;  // shared with the worker (one page)
  std::deque<size_t>
      sent;  // items sent whose marker has not arrived, oldest first
  size_t batchesSent = 0;
  size_t batchesDone = 0;  // 'r's received
  std::string buf;         // output since the last marker
};

class Pool {
 public:
  Pool(size_t items, const JobWorkerOptions& o, JobWorkerHooks& hooks,
       int outFd)
      : options_(o), hooks_(hooks), outFd_(outFd) {
    for (size_t i = 0; i < items; ++i) pending_.push_back(i);
    if (options_.workers == 0) options_.workers = 1;
  }
  ~Pool() {
    for (auto& w : workers_) {
      ::kill(w->pid, SIGKILL);
      ::waitpid(w->pid, nullptr, 0);
      closeFds(*w);
    }
  }

  JobCounts run() {
    while (!pending_.empty() || !workers_.empty()) {
      while (workers_.size() < options_.workers && !pending_.empty()) spawn();
      for (auto& w : workers_) feed(*w);
      waitForEvents();
    }
    return counts_;
  }

 private:
  /// What a forked worker needs before it runs workerMain.
  struct ChildStart {
    Pool* pool;
    Worker* worker;
    int* ctl;  // the control socket pair; the child keeps ctl[1]
    int* out;  // the output pipe; the child keeps out[1] as stdout
  };
  /// The worker child's entry point (ProcessSpawner::spawn).
  [[noreturn]] static int childEntry(void* arg);
  void spawn();
  void feed(Worker& w);
  void waitForEvents();
  void readControl(Worker& w);
  void readOutput(Worker& w);
  void finish(size_t slot);
  void passOnItems(Worker& w);
  static void closeFds(Worker& w) {
    if (w.ctl >= 0) ::close(w.ctl);
    if (w.out >= 0) ::close(w.out);
    w.ctl = w.out = -1;
    if (w.progress) ::munmap(w.progress, kPage);
    w.progress = nullptr;
  }
  static constexpr size_t kPage = 4096;

  JobWorkerOptions options_;
  JobWorkerHooks& hooks_;
  int outFd_;
  std::deque<size_t> pending_;
  std::vector<std::unique_ptr<Worker>> workers_;
  JobCounts counts_;
  size_t deathsBetweenItems_ = 0;
  static constexpr size_t kMaxDeathsBetweenItems = 3;
};

int Pool::childEntry(void* arg) {
  auto& s = *static_cast<ChildStart*>(arg);
  for (auto& other : s.pool->workers_) closeFds(*other);
  ::close(s.ctl[0]);
  ::close(s.out[0]);
  ::dup2(s.out[1], STDOUT_FILENO);
  ::close(s.out[1]);
  workerMain(s.ctl[1], s.pool->hooks_, *s.worker->progress,
             s.pool->options_.maxMemoryBytes);
}

void Pool::spawn() {
  int ctl[2], out[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0)
    throw SysError("creating an evaluation worker's control socket", errno);
  if (::pipe2(out, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(ctl[0]);
    ::close(ctl[1]);
    throw SysError("creating an evaluation worker's output pipe", err);
  }
  auto w = std::make_unique<Worker>();
  void* page = ::mmap(nullptr, kPage, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page != MAP_FAILED) w->progress = new (page) Progress;
  std::cout.flush();
  std::fflush(stdout);
  std::cerr.flush();
  ChildStart start{this, w.get(), ctl, out};
  ProcessSpawner& spawner =
      options_.spawner ? *options_.spawner : systemSpawner();
  pid_t pid =
      w->progress ? spawner.spawn(childEntry, &start, SpawnOptions{}) : -1;
  int err = errno;
  ::close(ctl[1]);
  ::close(out[1]);
  w->ctl = ctl[0];
  w->out = out[0];
  if (pid < 0) {
    closeFds(*w);
    throw SysError("forking an evaluation worker", err);
  }
  w->pid = pid;
  workers_.push_back(std::move(w));
}

void Pool::feed(Worker& w) {
  if (w.inputClosed || w.ctl < 0) return;
  while (!pending_.empty() && w.batchesSent - w.batchesDone < kBatchesAhead) {
    // Smaller batches as the work runs out, so that workers finish together.
    size_t n = std::clamp<size_t>(pending_.size() / (options_.workers * 8), 1,
                                  kMaxBatch);
    std::string cmd;
    for (size_t i = 0; i < n; ++i)
      cmd += std::to_string(pending_[i]) + (i + 1 < n ? " " : "\n");
    if (::send(w.ctl, cmd.data(), cmd.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(cmd.size()))
      return;  // the worker is exiting; finish() requeues what it had
    w.sent.insert(w.sent.end(), pending_.begin(),
                  pending_.begin() + static_cast<ptrdiff_t>(n));
    pending_.erase(pending_.begin(),
                   pending_.begin() + static_cast<ptrdiff_t>(n));
    ++w.batchesSent;
  }
  if (pending_.empty() && w.batchesSent == w.batchesDone) {
    ::shutdown(w.ctl, SHUT_WR);  // no more work: the worker flushes and exits
    w.inputClosed = true;
  }
}

void Pool::waitForEvents() {
  std::vector<pollfd> fds;
  std::vector<std::pair<size_t, bool>> who;  // worker slot, is control
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i]->ctl >= 0)
      fds.push_back({workers_[i]->ctl, POLLIN, 0}), who.push_back({i, true});
    if (workers_[i]->out >= 0)
      fds.push_back({workers_[i]->out, POLLIN, 0}), who.push_back({i, false});
  }
  if (fds.empty()) return;
  if (::poll(fds.data(), fds.size(), -1) < 0) {
    if (errno == EINTR) return;
    throw SysError("waiting for evaluation workers", errno);
  }
  for (size_t k = 0; k < fds.size(); ++k) {
    if (!fds[k].revents) continue;
    Worker& w = *workers_[who[k].first];
    if (who[k].second)
      readControl(w);
    else
      readOutput(w);
  }
  for (size_t i = workers_.size(); i-- > 0;)
    if (workers_[i]->ctl < 0 && workers_[i]->out < 0) finish(i);
}

void Pool::readControl(Worker& w) {
  char chunk[256];
  ssize_t n = ::recv(w.ctl, chunk, sizeof chunk, 0);
  if (n < 0 && errno == EINTR) return;
  if (n <= 0) {
    ::close(w.ctl);
    w.ctl = -1;
    return;
  }
  w.batchesDone += static_cast<size_t>(n);  // one 'r' per batch
}

void Pool::readOutput(Worker& w) {
  char chunk[65536];
  ssize_t n = ::read(w.out, chunk, sizeof chunk);
  if (n < 0 && errno == EINTR) return;
  if (n <= 0) {
    ::close(w.out);
    w.out = -1;
    return;
  }
  w.buf.append(chunk, static_cast<size_t>(n));
  passOnItems(w);
}

// Writes out every item whose marker has arrived, with its counts.
void Pool::passOnItems(Worker& w) {
  size_t start = 0;
  for (;;) {
    size_t m = w.buf.find(kMarker, start);
    if (m == std::string::npos) break;
    size_t nl = w.buf.find('\n', m);
    if (nl == std::string::npos) break;
    writeAll(outFd_, std::string_view(w.buf).substr(start, m - start));
    size_t jobs = 0, failed = 0;
    std::sscanf(w.buf.c_str() + m + kMarker.size(), "%zu %zu", &jobs, &failed);
    counts_.jobs += jobs;
    counts_.failed += failed;
    if (!w.sent.empty()) w.sent.pop_front();
    start = nl + 1;
  }
  w.buf.erase(0, start);
}

// Reaps a worker whose pipes are closed; reports or requeues what it had.
void Pool::finish(size_t slot) {
  std::unique_ptr<Worker> w = std::move(workers_[slot]);
  workers_.erase(workers_.begin() + static_cast<ptrdiff_t>(slot));
  int status = 0;
  while (::waitpid(w->pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    throw Error("an evaluation worker failed (exit code " +
                std::to_string(WEXITSTATUS(status)) + ")");
  std::deque<size_t> again = std::move(w->sent);
  size_t evaluating = w->progress ? w->progress->evaluating.load() : 0;
  closeFds(*w);
  if (WIFSIGNALED(status)) {
    std::string why = "the evaluation worker was killed by signal " +
                      std::to_string(WTERMSIG(status)) + " (" +
                      strsignal(WTERMSIG(status)) + ")";
    auto it = std::find(again.begin(), again.end(), evaluating - 1);
    if (evaluating == 0 || it == again.end()) {
      // Killed from outside between two items: what it had is done again,
      // unless workers keep dying that way.
      if (++deathsBetweenItems_ > kMaxDeathsBetweenItems)
        throw Error(why + " between jobs");
      pending_.insert(pending_.begin(), again.begin(), again.end());
      return;
    }
    again.erase(it);
    writeAll(outFd_, hooks_.lostItem(evaluating - 1,
                                     why + " while evaluating this job"));
    counts_.jobs += 1;
    counts_.failed += 1;
  }
  pending_.insert(pending_.begin(), again.begin(), again.end());
}

}  // namespace

JobCounts runJobWorkers(size_t items, const JobWorkerOptions& options,
                        JobWorkerHooks& hooks, int outFd) {
  reportCpuTime("parent");
  return Pool(items, options, hooks, outFd).run();
}

}  // namespace kiln::eval
