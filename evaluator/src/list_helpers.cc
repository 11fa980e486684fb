// Threads sharing the strict list builtins' elements while the root of a
// collection is evaluated (list_helpers.h).
#include "list_helpers.h"

#include <atomic>
#include <chrono>

#include "eval_parts.h"
#include "eval_threads.h"
#include "gc_support.h"  // GC_THREADS: pthread_create registers each thread
#include "kiln/evaluator/job_threads.h"

namespace kiln::eval {
namespace {

constexpr size_t kHelperStack = size_t{512} << 20;  // as the job threads'

std::atomic<uint64_t> gHelperCpuNanos{0};  // list helpers' CPU, all runs
std::atomic<uint64_t> gPublisherWaitNanos{0};

}  // namespace

// One parallelFor: its elements are handed out by an EntrySplitter (each
// thread from its own block first: neighbouring elements of a package
// list share dependencies, so threads far apart wait less for each other).
struct ListHelpers::Run {
  Run(size_t n, unsigned parts, const std::function<void(size_t)>& w, uint32_t d)
      : work(w), splitter(n, parts), depth(d) {}
  const std::function<void(size_t)>& work;
  EntrySplitter splitter;
  uint32_t depth;        // the publisher's call depth: each helper starts there
  unsigned workers = 1;  // under ListHelpers::mu_: threads in drain (the publisher first)
  std::atomic<size_t> firstError{SIZE_MAX};
  std::mutex errorMu;
  std::exception_ptr error;  // the exception of element firstError
};

ListHelpers::ListHelpers(EvalState& state, unsigned threads) : state_(state), threads_(threads) {
  if (threads < 2 || threads > EvalState::kMaxThreads)
    throw Error("list helpers need 2 to " + std::to_string(EvalState::kMaxThreads) + " threads");
  state.beginThreads(threads);
  ThreadSlots::enter(1);
  state.threads().setListHelpers(this);
  args_.reserve(threads - 1);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kHelperStack);
  for (uint32_t slot = 2; slot <= threads; ++slot) {
    args_.emplace_back(this, slot);
    pthread_t id;
    if (pthread_create(&id, &attr, helperMain, &args_.back()) != 0) break;
    ids_.push_back(id);
  }
  pthread_attr_destroy(&attr);
  threads_ = static_cast<unsigned>(ids_.size()) + 1;  // parts for the splitter
}

ListHelpers::~ListHelpers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (pthread_t id : ids_) pthread_join(id, nullptr);
  state_.threads().setListHelpers(nullptr);
  state_.endThreads();
  ThreadSlots::leave();
}

void* ListHelpers::helperMain(void* p) {
  auto* a = static_cast<std::pair<ListHelpers*, uint32_t>*>(p);
  a->first->serve(a->second);
  gHelperCpuNanos.fetch_add(static_cast<uint64_t>(cpuSeconds(CLOCK_THREAD_CPUTIME_ID) * 1e9),
                            std::memory_order_relaxed);
  return nullptr;
}

void ListHelpers::serve(uint32_t slot) {
  ThreadSlots::enter(slot);
  uint64_t seen = 0;  // the last run this thread joined
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || (run_ && runs_ != seen); });
    if (stop_) return;
    seen = runs_;
    Run& run = *run_;
    ++run.workers;  // the publisher waits for this thread before the run ends
    lock.unlock();
    state_.threads().depth() = run.depth;
    drain(run, slot - 1);
    lock.lock();
    if (--run.workers == 0) done_.notify_all();
  }
}

void ListHelpers::drain(Run& run, unsigned part) {
  while (true) {
    std::optional<size_t> i = run.splitter.next(part);
    if (!i || *i > run.firstError.load(std::memory_order_relaxed)) return;
    try {
      run.work(*i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(run.errorMu);
      if (*i < run.firstError.load(std::memory_order_relaxed)) {
        run.firstError.store(*i, std::memory_order_relaxed);
        run.error = std::current_exception();
      }
    }
  }
}

bool ListHelpers::parallelFor(size_t n, const std::function<void(size_t)>& work) {
  if (n < kMinElements || ThreadSlots::current() != 1 || ids_.empty()) return false;
  Run run(n, threads_, work, state_.threads().depth());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (run_) return false;  // called from inside an element: that element loops itself
    run_ = &run;
    ++runs_;
  }
  wake_.notify_all();
  drain(run, 0);
  auto start = std::chrono::steady_clock::now();
  {
    state_.threads().setAwaitingHelpers(true);  // a helper waiting for this thread: a cycle
    std::unique_lock<std::mutex> lock(mu_);
    --run.workers;
    done_.wait(lock, [&] { return run.workers == 0; });
    run_ = nullptr;
    state_.threads().setAwaitingHelpers(false);
  }
  gPublisherWaitNanos.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count(),
      std::memory_order_relaxed);
  if (run.error) std::rethrow_exception(run.error);
  return true;
}

bool parallelFor(EvalState& state, size_t n, const std::function<void(size_t)>& work) {
  if (n < ListHelpers::kMinElements || !state.threads().active()) return false;
  ListHelpers* h = state.threads().listHelpers();
  return h && h->parallelFor(n, work);
}

ListHelperTimes listHelperTimes() {
  return {static_cast<double>(gHelperCpuNanos.load()) / 1e9,
          static_cast<double>(gPublisherWaitNanos.load()) / 1e9};
}

}  // namespace kiln::eval
