// Job enumeration on threads sharing one EvalState (job_threads.h).
#include "kiln/evaluator/job_threads.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <stdexcept>

#include "eval_threads.h"
#include "gc_support.h"  // GC_THREADS: pthread_create registers each thread

namespace kiln::eval {
namespace {

constexpr size_t kThreadStack = size_t{512} << 20;  // as runWithLargeStack

struct Shared {
  Shared(EvalState& st, const JobRoot& r, Bindings* args, const std::string& attr, size_t n,
         unsigned threads, const JobRenderer& render)
      : state(st),
        root(r),
        autoArgs(args),
        rootAttr(attr),
        entries(n),
        render(render),
        splitter(n, threads),
        results(n) {}
  EvalState& state;
  const JobRoot& root;
  Bindings* autoArgs;
  const std::string& rootAttr;
  size_t entries;
  const JobRenderer& render;
  EntrySplitter splitter;
  std::atomic<bool> stop{false};
  std::vector<std::string> results;  // each entry's rendered jobs
  std::mutex mu;
  std::exception_ptr error;  // the first error that is not a job's
};

struct ThreadArg {
  Shared* shared;
  uint32_t slot;
};

void runThread(Shared& sh, uint32_t slot) {
  EvalState::enterThread(slot);
  while (!sh.stop.load()) {
    std::optional<size_t> next = sh.splitter.next(slot - 1);
    if (!next) return;
    const size_t i = *next;
    std::string text;
    enumerateJobEntry(sh.state, sh.root, i, sh.autoArgs, sh.rootAttr,
                      [&](const Job& job) { sh.render(job, text); });
    sh.results[i] = std::move(text);  // each index is written by one thread
  }
}

// When the process started, near enough (static initialisation): the
// KILN_EVAL_CPU_TIMES lines say when each phase ended, so the serial parts
// of a run (before and after the threads) are known in wall time too.
const auto kProcessStart = std::chrono::steady_clock::now();

double wallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - kProcessStart).count();
}

double cpuSeconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

void* threadMain(void* p) {
  auto* a = static_cast<ThreadArg*>(p);
  Shared& sh = *a->shared;
  try {
    runThread(sh, a->slot);
  } catch (...) {
    std::lock_guard<std::mutex> lock(sh.mu);
    if (!sh.error) sh.error = std::current_exception();
    sh.stop.store(true);
  }
  // As job_workers.cc: each thread's CPU time (and here its waits for
  // other threads' thunks), so the run's longest path is known whatever
  // the machine's load (bench/eval_workers.sh).
  if (std::getenv("KILN_EVAL_CPU_TIMES"))
    std::fprintf(stderr, "kiln eval cpu: thread %u %.2f s waited %.2f s ended at %.2f s\n",
                 a->slot, cpuSeconds(CLOCK_THREAD_CPUTIME_ID),
                 static_cast<double>(threadWaitNanos()) / 1e9, wallSeconds());
  return nullptr;
}

constexpr uint64_t kLow = 0xffffffffu;

uint64_t packRange(uint64_t front, uint64_t back) { return front | (back << 32); }

}  // namespace

EntrySplitter::EntrySplitter(size_t n, unsigned parts)
    : blocks_(std::make_unique<Block[]>(parts == 0 ? 1 : parts)), parts_(parts == 0 ? 1 : parts) {
  if (n > kLow) throw std::length_error("too many entries to evaluate: " + std::to_string(n));
  for (unsigned p = 0; p < parts_; ++p)
    blocks_[p].range.store(packRange(n * p / parts_, n * (p + 1) / parts_));
}

std::optional<size_t> EntrySplitter::takeFront(Block& b) {
  uint64_t r = b.range.load();
  while ((r & kLow) < (r >> 32))
    if (b.range.compare_exchange_weak(r, r + 1)) return r & kLow;
  return std::nullopt;
}

std::optional<size_t> EntrySplitter::takeBack(Block& b) {
  uint64_t r = b.range.load();
  while ((r & kLow) < (r >> 32))
    if (b.range.compare_exchange_weak(r, r - (uint64_t{1} << 32))) return (r >> 32) - 1;
  return std::nullopt;
}

std::optional<size_t> EntrySplitter::next(unsigned part) {
  if (auto i = takeFront(blocks_[part % parts_])) return i;
  while (true) {  // steal from the back of the fullest block
    Block* fullest = nullptr;
    uint64_t most = 0;
    for (unsigned p = 0; p < parts_; ++p) {
      uint64_t r = blocks_[p].range.load();
      uint64_t left = (r >> 32) - std::min(r & kLow, r >> 32);
      if (left > most) most = left, fullest = &blocks_[p];
    }
    if (!fullest) return std::nullopt;
    if (auto i = takeBack(*fullest)) return i;
  }
}

void enumerateJobsThreaded(EvalState& state, const JobRoot& root, Bindings* autoArgs,
                           const std::string& rootAttr, unsigned threads,
                           const JobRenderer& render,
                           const std::function<void(size_t, const std::string&)>& onEntry) {
  if (threads == 0 || threads > EvalState::kMaxThreads)
    throw Error("the number of evaluation threads must be between 1 and " +
                std::to_string(EvalState::kMaxThreads));
  Shared sh(state, root, autoArgs, rootAttr, root.isDerivation ? 1 : root.entries.size(),
            threads, render);
  std::vector<ThreadArg> args(threads);
  std::vector<pthread_t> ids;
  if (std::getenv("KILN_EVAL_CPU_TIMES"))
    std::fprintf(stderr, "kiln eval cpu: before threads %.2f s at %.2f s\n",
                 cpuSeconds(CLOCK_PROCESS_CPUTIME_ID), wallSeconds());
  state.beginThreads(threads);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kThreadStack);
  for (unsigned t = 0; t < threads; ++t) {
    args[t] = {&sh, t + 1};
    pthread_t id;
    if (pthread_create(&id, &attr, threadMain, &args[t]) != 0) break;
    ids.push_back(id);
  }
  pthread_attr_destroy(&attr);
  for (pthread_t id : ids) pthread_join(id, nullptr);
  state.endThreads();
  if (ids.empty()) throw Error("cannot start evaluation threads");
  if (sh.error) std::rethrow_exception(sh.error);
  for (size_t i = 0; i < sh.entries; ++i) onEntry(i, sh.results[i]);
  if (std::getenv("KILN_EVAL_CPU_TIMES"))
    std::fprintf(stderr, "kiln eval cpu: after threads %.2f s at %.2f s\n",
                 cpuSeconds(CLOCK_PROCESS_CPUTIME_ID), wallSeconds());
}

}  // namespace kiln::eval
