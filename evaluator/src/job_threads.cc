// Job enumeration on threads sharing one EvalState (job_threads.h).
#include "kiln/evaluator/job_threads.h"

#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <stdexcept>

#include "eval_threads.h"
#include "list_helpers.h"
#include "gc_support.h"  // GC_THREADS: pthread_create registers each thread

namespace kiln::eval {
namespace {

constexpr size_t kThreadStack = size_t{512} << 20;  // as runWithLargeStack

constexpr size_t kSplitMin = 16;  // attributes of an entered set worth splitting

// The entries in the order their definitions appear in the sources (by
// position; entries without one keep their name order, first). A package
// set is usually written with a package's dependencies defined before it,
// so threads walking in this order find most dependencies evaluated,
// where name order (pkg1, pkg10, pkg100, ...) made each thread's first
// jobs force long chains that the other thread was also forcing
// (gen-pkgset 50,000 window shape: waits for the other thread's thunks
// 0.6-1.1 s -> 0.03 s).
std::vector<size_t> walkOrder(const JobRoot& root, size_t n) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  if (!root.isDerivation)
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return root.entries[a]->pos < root.entries[b]->pos;
    });
  return order;
}

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
        results(n),
        parts(n),
        prefixes(n),
        order(walkOrder(r, n)) {}
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
  // Large entered sets (package scopes) are split into one task per
  // attribute, which the splitting thread takes before new entries and
  // the others once they have no entries left (SplitTasks): one scope of
  // thousands of jobs no longer keeps one thread busy while the other
  // has nothing left. Under subMu: subs, tasks, and the sizes of parts.
  struct SubTask {
    size_t entry, part;
    const Attr* attr;
  };
  std::mutex subMu;
  std::condition_variable subCv;  // subs added, or no entry being walked
  std::vector<SubTask> subs;  // by task number (SplitTasks)
  SplitTasks tasks;
  unsigned busy = 0;                           // threads walking an entry (may split it)
  std::vector<std::vector<std::string>> parts;  // per split entry, each task's text
  std::vector<std::string> prefixes;           // per split entry, its attribute path
  std::vector<size_t> order;                   // entries by source position (walkOrder)
};

struct ThreadArg {
  Shared* shared;
  uint32_t slot;
};

// Walks entry i, or splits it into tasks when it is a large entered set.
void walkEntry(Shared& sh, size_t i, uint32_t slot) {
  std::vector<const Attr*> subs = jobEntrySubEntries(sh.state, sh.root, i, sh.autoArgs);
  if (subs.size() >= kSplitMin) {
    std::string prefix = jobEntryAttr(sh.state, sh.root, i, sh.rootAttr);
    std::lock_guard<std::mutex> lock(sh.subMu);
    sh.prefixes[i] = std::move(prefix);
    sh.parts[i].resize(subs.size());
    sh.tasks.add(subs.size(), slot);
    for (size_t j = 0; j < subs.size(); ++j) sh.subs.push_back({i, j, subs[j]});
    sh.subCv.notify_all();
    return;
  }
  std::string text;
  enumerateJobEntry(sh.state, sh.root, i, sh.autoArgs, sh.rootAttr,
                    [&](const Job& job) { sh.render(job, text); });
  sh.results[i] = std::move(text);  // each index is written by one thread
}

// How long the calling thread waited for a task (KILN_EVAL_CPU_TIMES).
thread_local std::chrono::steady_clock::duration tTaskWait{};

// The next task: one of a set this thread split, or, once it has no
// entries left, any; none once no thread can add any. Waits while a
// thread walks an entry that may still be split.
std::optional<Shared::SubTask> nextSub(Shared& sh, uint32_t slot, bool entriesLeft) {
  std::unique_lock<std::mutex> lock(sh.subMu);
  while (true) {
    if (auto t = sh.tasks.next(slot, entriesLeft)) return sh.subs[*t];
    if (entriesLeft || sh.busy == 0 || sh.stop.load()) return std::nullopt;
    auto start = std::chrono::steady_clock::now();
    sh.subCv.wait(lock);
    tTaskWait += std::chrono::steady_clock::now() - start;
  }
}

void runThread(Shared& sh, uint32_t slot) {
  EvalState::enterThread(slot);
  bool entriesLeft = true;
  while (!sh.stop.load()) {
    if (auto t = nextSub(sh, slot, entriesLeft)) {
      std::string text;
      enumerateJobSubEntry(sh.state, sh.root, *t->attr, sh.prefixes[t->entry], sh.autoArgs,
                           [&](const Job& job) { sh.render(job, text); });
      sh.parts[t->entry][t->part] = std::move(text);  // one writer per part
      continue;
    }
    if (!entriesLeft) return;
    std::optional<size_t> next;
    {
      std::lock_guard<std::mutex> lock(sh.subMu);  // busy before taking: see nextSub
      next = sh.splitter.next(slot - 1);
      if (next) ++sh.busy;
    }
    if (!next) {
      entriesLeft = false;
      continue;
    }
    walkEntry(sh, sh.order[*next], slot);
    std::lock_guard<std::mutex> lock(sh.subMu);
    if (--sh.busy == 0) sh.subCv.notify_all();
  }
}

// When the process started, near enough (static initialisation): the
// KILN_EVAL_CPU_TIMES lines say when each phase ended, so the serial parts
// of a run (before and after the threads) are known in wall time too.
const auto kProcessStart = std::chrono::steady_clock::now();

double wallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - kProcessStart).count();
}

void* threadMain(void* p) {
  auto* a = static_cast<ThreadArg*>(p);
  Shared& sh = *a->shared;
  try {
    runThread(sh, a->slot);
  } catch (...) {
    std::lock_guard<std::mutex> lock(sh.mu);
    if (!sh.error) sh.error = std::current_exception();
    std::lock_guard<std::mutex> subLock(sh.subMu);  // wakes threads waiting for tasks
    sh.stop.store(true);
    sh.subCv.notify_all();
  }
  // As job_workers.cc: each thread's CPU time (and here its waits for
  // other threads' thunks), so the run's longest path is known whatever
  // the machine's load (bench/eval_workers.sh).
  if (std::getenv("KILN_EVAL_CPU_TIMES")) {
    rusage ru{};
    getrusage(RUSAGE_THREAD, &ru);
    std::fprintf(stderr,
                 "kiln eval cpu: thread %u %.2f s waited %.2f s ended at %.2f s"
                 " (%.2f s waiting for a task; %ld sleeps, %ld preemptions, %ld page faults)\n",
                 a->slot, cpuSeconds(CLOCK_THREAD_CPUTIME_ID),
                 static_cast<double>(threadWaitNanos()) / 1e9, wallSeconds(),
                 std::chrono::duration<double>(tTaskWait).count(), ru.ru_nvcsw, ru.ru_nivcsw,
                 ru.ru_minflt + ru.ru_majflt);
  }
  if (waitSitesRecorded()) {  // where this thread waited for other threads' work
    auto sites = threadWaitSites();
    std::lock_guard<std::mutex> lock(sh.mu);
    for (size_t i = 0; i < sites.size() && i < 5 && sites[i].second >= 5000000; ++i)
      std::fprintf(stderr, "kiln eval cpu: thread %u waited %.2f s forcing at %s\n", a->slot,
                   static_cast<double>(sites[i].second) / 1e9,
                   sh.state.positions.show(sites[i].first).c_str());
  }
  return nullptr;
}

constexpr uint64_t kLow = 0xffffffffu;

uint64_t packRange(uint64_t front, uint64_t back) { return front | (back << 32); }

}  // namespace

size_t SplitTasks::add(size_t count, unsigned owner) {
  size_t first = added_;
  added_ += count;
  if (count > 0) sets_.push_back({first, added_, owner});
  return first;
}

std::optional<size_t> SplitTasks::next(unsigned thread, bool ownOnly) {
  while (firstOpen_ < sets_.size() && sets_[firstOpen_].next == sets_[firstOpen_].end)
    ++firstOpen_;
  for (size_t s = firstOpen_; s < sets_.size(); ++s)
    if (sets_[s].owner == thread && sets_[s].next < sets_[s].end) return sets_[s].next++;
  if (ownOnly || firstOpen_ == sets_.size()) return std::nullopt;
  return sets_[firstOpen_].next++;
}

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

JobRoot prepareJobRootThreaded(EvalState& state, Value& root, Bindings* autoArgs,
                               const JobWalkOptions& options, unsigned threads) {
  if (threads < 2) return prepareJobRoot(state, root, autoArgs, options);
  ListHelpers helpers(state, threads);
  return prepareJobRoot(state, root, autoArgs, options);
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
  if (std::getenv("KILN_EVAL_CPU_TIMES")) {
    // The longest path so far: the list helpers' CPU (prepareJobRootThreaded)
    // ran beside this thread's, which waited for their last elements.
    ListHelperTimes lists = listHelperTimes();
    std::fprintf(stderr, "kiln eval cpu: before threads %.2f s at %.2f s\n",
                 cpuSeconds(CLOCK_PROCESS_CPUTIME_ID) - lists.helperCpu + lists.publisherWait,
                 wallSeconds());
    if (lists.helperCpu > 0)
      std::fprintf(stderr, "kiln eval cpu: list helpers %.2f s, the root's thread waited %.2f s\n",
                   lists.helperCpu, lists.publisherWait);
  }
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
  for (size_t i = 0; i < sh.entries; ++i) {
    if (sh.parts[i].empty()) {
      onEntry(i, sh.results[i]);
      continue;
    }
    std::string text;
    for (const std::string& part : sh.parts[i]) text += part;
    onEntry(i, text);
  }
  if (std::getenv("KILN_EVAL_CPU_TIMES")) {
    std::fprintf(stderr, "kiln eval cpu: after threads %.2f s at %.2f s\n",
                 cpuSeconds(CLOCK_PROCESS_CPUTIME_ID), wallSeconds());
    HeapWarmerStats warm = heapWarmerStats();
    std::fprintf(stderr, "kiln eval cpu: heap warmer populated %llu MiB, grew the heap by %llu MiB\n",
                 static_cast<unsigned long long>(warm.populatedBytes >> 20),
                 static_cast<unsigned long long>(warm.grownBytes >> 20));
  }
}

}  // namespace kiln::eval
